package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/ratedb/ratedb/bench/internal/cmdsig"
)

// childPrefix starts the line on which a child process prints its result.
const childPrefix = "BENCH-CHILD-RESULT "

// PrintChildResult writes v as the child's result line on stdout.
func PrintChildResult(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(os.Stdout, "%s%s\n", childPrefix, b)
	return err
}

// RunChild runs name with args and extra environment variables, passes its
// stderr through to ours, and decodes its result line into v. When ctx
// ends, the child gets SIGTERM, so that a bench command runs its clean-up,
// and is killed if still running cmdsig.StopDelay later; RunChild returns
// once it has exited.
func RunChild(ctx context.Context, v any, env []string, name string, args ...string) error {
	cmd := cmdsig.Command(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("bench: child %s %v: %w\n%s", name, args, err, out)
	}
	for line := range bytes.Lines(out) {
		if rest, ok := bytes.CutPrefix(line, []byte(childPrefix)); ok {
			return json.Unmarshal(rest, v)
		}
	}
	return fmt.Errorf("bench: child %s %v printed no result:\n%s", name, args, out)
}

// StartCPUProfile starts a CPU profile written to path and returns the
// function that stops it; with path "" it does nothing. The commands use it
// for their -cpuprofile flag.
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
