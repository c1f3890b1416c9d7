package serve

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// readyPeriod is how long a readiness outcome answers /readyz before the
// store is checked again.
const readyPeriod = time.Second

// readiness runs a store's readiness check (a snapshot of the embedded
// file, a Redis PING) for /readyz, which needs no key: however many
// requests ask, at most one check runs at a time, callers that arrive
// while it runs share its outcome, and an outcome answers for period after
// it, so that /readyz cannot be used to make the file snapshot, or Redis
// answer, as often as a caller likes. It logs when the outcome changes
// (the store became unusable, or usable again), not once a request, so that
// callers of /readyz cannot fill the log. It is safe for concurrent use.
type readiness struct {
	check  func() error     // the store's check; it may take long
	period time.Duration    // how long an outcome is reused
	now    func() time.Time // the clock
	log    *slog.Logger

	mu      sync.Mutex
	at      time.Time     // when the last check ended (zero: none yet)
	err     error         // its outcome
	running chan struct{} // closed when the check in progress ends; nil if none
}

// newReadiness returns the readiness of check, reused for period, logging
// its changes to log.
func newReadiness(check func() error, period time.Duration, now func() time.Time, log *slog.Logger) *readiness {
	return &readiness{check: check, period: period, now: now, log: log}
}

// ready reports the store's readiness: the outcome of a check that ended
// less than period ago, or that of a check it starts or joins. A caller
// whose ctx ends first gets ctx's error; the check goes on for the others.
func (r *readiness) ready(ctx context.Context) error {
	r.mu.Lock()
	if r.running == nil && !r.at.IsZero() && r.now().Sub(r.at) < r.period {
		err := r.err
		r.mu.Unlock()
		return err
	}
	if r.running == nil {
		done := make(chan struct{})
		r.running = done
		go func() {
			err := r.check()
			r.mu.Lock()
			was := r.at.IsZero() || r.err == nil
			r.at, r.err, r.running = r.now(), err, nil
			r.mu.Unlock()
			switch {
			case err != nil && was:
				r.log.Warn("not ready: the store is not usable", "err", err)
			case err == nil && !was:
				r.log.Info("ready: the store is usable again")
			}
			close(done)
		}()
	}
	done := r.running
	r.mu.Unlock()
	select {
	case <-done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
