package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb/bench"
	"github.com/redis/go-redis/v9"

	"github.com/ratedb/ratedb/bench/internal/cmdtest"
)

func TestMain(m *testing.M) {
	cmdtest.Main(main)
	os.Exit(m.Run())
}

// redisbench runs the command in a process of its own with args, TMPDIR
// set to tmpdir and the environment's other variables plus env, and
// returns its stdout, stderr and exit status.
func redisbench(t *testing.T, tmpdir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	return cmdtest.Run(t, cmdtest.Cmd{TempDir: tmpdir, Env: env}, args...)
}

// TestNoTempDirLeftWhenRedisFailsToStart runs the command where
// redis-server cannot start (PATH holds no redis-server): it must exit 1
// with the reason on stderr and remove the temporary directory it made for
// the server, which log.Fatal used to leave behind (os.Exit runs no
// deferred function). -keys 0, which made every row of the many-keys set
// divide by zero in a goroutine (a crash that left the directory and a
// running redis-server behind), is refused before anything is made.
func TestNoTempDirLeftWhenRedisFailsToStart(t *testing.T) {
	tmp := t.TempDir()
	_, stderr, code := redisbench(t, tmp, []string{"PATH=" + t.TempDir()}, "-quick")
	if code != 1 {
		t.Errorf("exit status %d, want 1; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "redis-server is not on PATH") {
		t.Errorf("stderr does not say why redis-server did not start:\n%s", stderr)
	}
	cmdtest.RequireEmpty(t, tmp)

	_, stderr, code = redisbench(t, tmp, []string{"PATH=" + t.TempDir()}, "-keys", "0", "-duration", "1ms")
	if code != 2 || !strings.Contains(stderr, "-keys must be at least 1") {
		t.Errorf("-keys 0: exit status %d, want 2 with the reason; stderr:\n%s", code, stderr)
	}
	cmdtest.RequireEmpty(t, tmp)

	_, stderr, code = redisbench(t, tmp, []string{"PATH=" + t.TempDir()}, "-quick", "20")
	if code != 2 || !strings.Contains(stderr, `redisbench: unexpected argument "20" (every setting is a flag: -h lists them)`) {
		t.Errorf("a stray argument: exit status %d, want 2 with the reason; stderr:\n%s", code, stderr)
	}
	cmdtest.RequireEmpty(t, tmp)
}

// TestUnwritableOutFails runs a short benchmark against a real
// redis-server twice: with -out in a directory that exists it exits 0 and
// writes the report; with -out in one that does not, it must exit 1 (it
// used to log the error and exit 0, so a script went on with no report
// file). Both runs leave nothing in TMPDIR.
func TestUnwritableOutFails(t *testing.T) {
	bench.NeedRedisServer(t)
	tmp := t.TempDir()
	args := []string{"-duration", "20ms", "-keys", "100"}
	good := filepath.Join(t.TempDir(), "REDIS.md")
	_, stderr, code := redisbench(t, tmp, nil, append(args, "-out", good)...)
	if code != 0 {
		t.Fatalf("-out %s: exit status %d, want 0; stderr:\n%s", good, code, stderr)
	}
	if b, err := os.ReadFile(good); err != nil || !strings.Contains(string(b), "| bare EVALSHA | 64 | 100 |") {
		t.Fatalf("the report file (err %v) lacks the last row:\n%s", err, b)
	}
	cmdtest.RequireEmpty(t, tmp)

	bad := filepath.Join(t.TempDir(), "missing", "REDIS.md")
	out, stderr, code := redisbench(t, tmp, nil, append(args, "-out", bad)...)
	if code != 1 {
		t.Errorf("-out %s: exit status %d, want 1; stderr:\n%s", bad, code, stderr)
	}
	if !strings.Contains(stderr, "redisbench: open "+bad) || !strings.Contains(out, "| bare EVALSHA | 64 | 100 |") {
		t.Errorf("want the report on stdout and the error on stderr; stdout:\n%s\nstderr:\n%s", out, stderr)
	}
	cmdtest.RequireEmpty(t, tmp)
}

// TestRowServerStatsCoverTimedHitsOnly checks that a row's Redis figures
// come from the timed hits alone: after measureRow, INFO commandstats holds
// exactly one EVALSHA per timed hit of the bare EVALSHA limiter, none of the
// untimed pass over the 1,000 keys before them (which creates every key, a
// dearer call than the timed ones, and was half of a 100,000-key row's
// calls).
func TestRowServerStatsCoverTimedHitsOnly(t *testing.T) {
	bench.NeedRedisServer(t)
	srv, err := bench.StartRedis(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	var f bench.RedisFactory
	for _, x := range bench.RedisFactories {
		if x.Name == "bare EVALSHA" {
			f = x
		}
	}
	if f.New == nil {
		t.Fatal("no bare EVALSHA in bench.RedisFactories")
	}
	lim, err := f.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := bench.Keys(1000)
	r, err := measureRow(ctx, c, lim, f.Name, 4, keys, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Hits == 0 || r.Errors != 0 || r.Allowed != r.Hits {
		t.Fatalf("row: %+v", r)
	}
	calls, _, err := scriptStats(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if calls != float64(r.Hits) {
		t.Fatalf("INFO commandstats counts %.0f script calls for %d timed hits (and %d untimed before them): the row's Redis figures do not cover the timed hits alone", calls, r.Hits, len(keys))
	}
	if r.ServerPerCall <= 0 {
		t.Fatalf("ServerPerCall %v µs, want > 0", r.ServerPerCall)
	}
}

// TestInterruptStopsRedis runs the command with ten-minute rows and sends
// it SIGTERM once its redis-server answers: it must stop, exit 143 with
// "interrupted" on stderr, and leave neither its redis-server running nor
// the server's temporary directory in TMPDIR. Before, the signal ended the
// command at once and the redis-server ran on, an orphan, with its
// directory left behind.
func TestInterruptStopsRedis(t *testing.T) {
	bench.NeedRedisServer(t)
	tmp := t.TempDir()
	p := cmdtest.Start(t, cmdtest.Cmd{TempDir: tmp}, "-duration", "10m", "-keys", "100")
	p.WaitStderr(t, "redisbench: redis-server ", time.Minute)
	kids := cmdtest.WaitChildren(t, p.Pid(), 1, time.Minute, "redis-server")
	p.Signal(t, syscall.SIGTERM)
	_, stderr, code := p.Wait(t, time.Minute)
	if code != 143 {
		t.Errorf("exit status %d, want 143; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "redisbench: interrupted by SIGTERM") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr)
	}
	cmdtest.RequireGone(t, kids...)
	cmdtest.RequireEmpty(t, tmp)
}
