package proctest

import (
	"net"
	"testing"
)

// A port taken between its pick and the server's start (by a process that
// accepts connections but is not this redis-server) must not be handed out:
// startRedis tries another port and returns the address of its own server.
func TestStartRedisSkipsATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	go func() {
		for {
			c, err := taken.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	real := pickPort
	picks := 0
	pickPort = func() (string, error) {
		if picks++; picks == 1 {
			return taken.Addr().String(), nil
		}
		return real()
	}
	defer func() { pickPort = real }()

	addr, proc, kill := startRedis(t)
	defer kill()
	if addr == taken.Addr().String() {
		t.Fatalf("startRedis returned the taken port %s", addr)
	}
	if picks < 2 {
		t.Fatalf("startRedis picked %d ports, want a second after the taken one", picks)
	}
	pid, err := redisPID(addr)
	if err != nil {
		t.Fatal(err)
	}
	if pid != proc.Pid {
		t.Fatalf("%s is answered by pid %d, not the server started (%d)", addr, pid, proc.Pid)
	}
}
