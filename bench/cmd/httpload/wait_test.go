package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// waitHTTP notices a process that exits before it serves, and reads its
// state without a data race: it read cmd.ProcessState while the goroutine
// startProc starts to wait for the process wrote it (go test -race failed);
// it now reads the channel startProc closes once the process has exited.
func TestWaitHTTPSeesAnExitedProcess(t *testing.T) {
	bin, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false command")
	}
	addr, err := freeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	_, exited, stop, err := startProc(context.Background(), t.TempDir(), "false", nil, bin)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	err = waitHTTP(context.Background(), "http://"+addr+"/", bin, exited)
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("waitHTTP = %v, want an error saying the process exited", err)
	}
}
