package httplimit

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/ratedb/ratedb"
)

// Rater decides whether a request of the given cost fits key's quota and
// counts it if so. *ratedb.Layered is a Rater as it is; Window adapts any
// ratedb.Limiter, which needs a limit.
//
// The middleware builds the RateLimit headers from the Result alone: Limit,
// Remaining, ResetAt and RetryAfter, and for the policy Tiers when it is not
// nil, else Limit and Scale. Implementations must be safe for concurrent
// use, and their errors should not contain the key: they are passed to
// Options.OnError.
type Rater interface {
	Hit(ctx context.Context, key string, cost int64) (ratedb.Result, error)
}

var _ Rater = (*ratedb.Layered)(nil)

// Window returns a Rater that allows at most limit units of cost per window
// of lim, for example 100 requests per minute with a one-minute
// *ratedb.Window. limit must be >= 0 (0 denies every request); New reports a
// nil lim or a negative limit.
//
// Counters belong to the limiter, not to the Rater: two middlewares over the
// same *ratedb.Window (DB.Window returns the same one for the same algorithm
// and scale) count the same keys together, whatever their limits. Give each
// its own keys, for example Keys(KeyConst("login"), KeyByIP).
func Window(lim ratedb.Limiter, limit int64) Rater {
	return &window{lim: lim, limit: limit}
}

type window struct {
	lim   ratedb.Limiter
	limit int64
}

func (w *window) Hit(ctx context.Context, key string, cost int64) (ratedb.Result, error) {
	return w.lim.Hit(ctx, key, w.limit, cost)
}

// validate reports what New can check about w before the first request.
func (w *window) validate() error {
	var errs []error
	if w.lim == nil {
		errs = append(errs, fmt.Errorf("%w: httplimit: Window: nil limiter", ratedb.ErrInvalidArgument))
	} else if v := reflect.ValueOf(w.lim); v.Kind() == reflect.Pointer && v.IsNil() {
		errs = append(errs, fmt.Errorf("%w: httplimit: Window: nil %T", ratedb.ErrInvalidArgument, w.lim))
	}
	if w.limit < 0 {
		errs = append(errs, fmt.Errorf("%w: httplimit: Window: limit %d is negative", ratedb.ErrInvalidArgument, w.limit))
	}
	return errors.Join(errs...)
}
