// Package cmdsig makes a bench command stop on SIGINT or SIGTERM the way it
// stops on an error: Context's context is cancelled, the command's work
// (the loops, the child processes started with Command) ends, its deferred
// clean-up runs (children stopped and waited for, temporary directories
// removed, profiles stopped), and Status turns its exit status into 128
// plus the signal's number (130 for SIGINT, 143 for SIGTERM), after a
// "<command>: interrupted by SIGINT" line on stderr.
package cmdsig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// Interrupted is the cause (context.Cause) of a context from Context that
// a signal cancelled.
type Interrupted struct {
	Signal syscall.Signal // syscall.SIGINT or syscall.SIGTERM
}

func (e *Interrupted) Error() string {
	return "interrupted by " + name(e.Signal)
}

func name(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// Context returns a context cancelled, with an *Interrupted cause, by the
// first SIGINT or SIGTERM the process receives, and a function that stops
// listening for them, which the command defers. After the first signal the
// two get their default action back: a second one ends the process at
// once, clean-up or not.
func Context() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			signal.Stop(ch)
			cancel(&Interrupted{Signal: s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// Status returns code, the exit status of a command that was not
// interrupted. If a signal cancelled ctx (from Context), it prints
// "<command>: interrupted by <signal>" on stderr and returns 128 plus the
// signal's number instead: call it after the command's clean-up.
func Status(ctx context.Context, command string, code int) int {
	var in *Interrupted
	if !errors.As(context.Cause(ctx), &in) {
		return code
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", command, in)
	return 128 + int(in.Signal)
}

// Sleep waits for d or until ctx ends, whichever comes first, and returns
// ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return ctx.Err()
}

// StopDelay is how long a child started by Command has, after its SIGTERM,
// to exit before it is killed.
const StopDelay = 10 * time.Second

// Command is exec.CommandContext, except that when ctx ends the child gets
// SIGTERM, so that a server shuts down and a bench command running as a
// child runs its own clean-up; one still running StopDelay later is killed.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = StopDelay
	return cmd
}
