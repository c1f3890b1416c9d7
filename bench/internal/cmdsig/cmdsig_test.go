package cmdsig

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// TestSignalCancelsContext sends this process SIGTERM while Context
// listens: the context must end with an *Interrupted cause naming it and
// Status must turn any status into 143; before the signal, Status returns
// the command's own status.
func TestSignalCancelsContext(t *testing.T) {
	ctx, stop := Context()
	defer stop()
	if got := Status(ctx, "test", 1); got != 1 {
		t.Fatalf("Status before a signal = %d, want 1", got)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("SIGTERM did not cancel the context")
	}
	in, ok := context.Cause(ctx).(*Interrupted)
	if !ok || in.Signal != syscall.SIGTERM || in.Error() != "interrupted by SIGTERM" {
		t.Fatalf("cause %v, want interrupted by SIGTERM", context.Cause(ctx))
	}
	if got := Status(ctx, "test", 0); got != 143 {
		t.Fatalf("Status after SIGTERM = %d, want 143", got)
	}
	if err := Sleep(ctx, time.Hour); err == nil {
		t.Fatal("Sleep on an ended context returned nil")
	}
}

// TestStopEndsContextWithoutInterrupt: the function Context returns
// cancels its context, but that is no interruption: Status keeps the
// command's status.
func TestStopEndsContextWithoutInterrupt(t *testing.T) {
	ctx, stop := Context()
	stop()
	<-ctx.Done()
	if got := Status(ctx, "test", 2); got != 2 {
		t.Fatalf("Status = %d, want 2", got)
	}
}
