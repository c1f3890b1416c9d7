package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/limits"
	"github.com/redis/go-redis/v9"
)

// MaxCount is the largest count a redisstore window holds: 2^53-1, the
// largest integer Redis's Lua scripts compute exactly. Set and Inc past it
// return ErrInvalidArgument; a Hit never counts past a limit, and a limit
// above MaxCount behaves as MaxCount. (The embedded DB holds counts up to
// 2^63-1.)
const MaxCount = int64(1)<<53 - 1

// Defaults of Options.
const (
	// DefaultPrefix is Options.Prefix's default.
	DefaultPrefix = "ratedb:"
	// DefaultTimeout is Options.Timeout's default.
	DefaultTimeout = 50 * time.Millisecond
)

// Clock is the time source of a Store's windows: ServerClock (the default)
// or LocalClock.
type Clock struct {
	now   func() time.Time // nil: Redis TIME
	isNil bool             // LocalClock(nil), which New rejects
}

// ServerClock reads the time with Redis's TIME command inside each script,
// so every instance sharing the Redis server agrees on every window, however
// skewed their own clocks are. On a Redis Cluster, each key's windows follow
// the clock of the node that holds it (see the package doc, Time). It is the
// zero Clock, the default.
var ServerClock = Clock{}

// LocalClock makes f, called once per operation, the time source (Unix
// milliseconds of f()). Use it to drive windows from a fake clock in tests,
// or when the callers' clocks are known to agree; instances with skewed
// clocks then disagree on window boundaries by their skew. f must not be nil
// and, as every call of the Store reads it on the caller's goroutine, must
// be safe for concurrent use.
//
// Redis still expires keys by its own clock, so with LocalClock a key is
// kept one scale (its largest tier's) past its window's end by f: a clock
// stepped back, or running behind Redis's by less than a scale, never sees
// a key vanish while its window is open. A fake clock held still while real
// time passes for longer than that can: the window's count then starts
// again from zero. Advance a fake clock at least as fast as real time.
// A reading before 1970 or from the year 10000 on makes the call return an
// error wrapping ratedb.ErrClockOutOfRange, as in the embedded DB.
//
// With a real clock, LocalClock can admit more than a limit around window
// boundaries: concurrent calls read f in one order and reach Redis in
// another, and a call that read the time before a boundary and runs after
// one that opened the next window is taken for a clock stepped back, so
// the window is cut back to end one scale after its reading (see the
// package doc); the cut-off end of the window starts again from zero.
// ServerClock reads the time inside the script and has no such race.
func LocalClock(f func() time.Time) Clock {
	return Clock{now: f, isNil: f == nil}
}

// Options configures a Store. The zero value of every field selects its
// default; pass nil to New for all defaults. New copies the Options.
type Options struct {
	// Prefix starts the name of every Redis key the Store writes. Two Stores
	// with different prefixes never share a key. Default "ratedb:". It must
	// not contain '{' or '}': the hash tag of every key is the user key, and
	// a tag in the prefix would put every key in one Cluster slot.
	Prefix string

	// Timeout bounds every call, whatever ctx says: a call Redis has not
	// answered after Timeout returns an error matching
	// ratedb.ErrUnavailable and context.DeadlineExceeded; a call whose ctx
	// ends first, one matching ratedb.ErrUnavailable and ctx.Err(). Either
	// also wraps what the call last met, when the Store knows it: a Redis
	// reply saying the script did not run (BUSY, LOADING, TRYAGAIN: such
	// calls are retried until then) or the network error of a read that
	// the deadline cut short. The Store knows only the errors go-redis
	// returns to it, and go-redis returns the context's error alone when
	// the deadline passes while it opens a connection or during its own
	// pause between two attempts of a command it retries (up to the
	// client's MaxRetries). So the network error of a read cut short is
	// kept only on a connection already open, of a client that honours
	// deadlines (ContextTimeoutEnabled, below), in a call go-redis does not
	// retry: Hit and Inc without DedupWindow, Set, Refund, Undo and Reset.
	// Get, ExpiresAt and State, and Hit and Inc with DedupWindow, lose it
	// (go-redis retries after it), as they lose a refused connection or a
	// LOADING or TRYAGAIN reply that go-redis was still retrying. On a
	// client that does not honour deadlines, and on a ClusterClient, the
	// Store stops waiting for the call at the deadline (below) and knows
	// only the replies it was itself retrying (BUSY always; the others once
	// go-redis has stopped retrying them, or for calls it does not retry).
	// The Store enforces Timeout itself, even for a client
	// built without ContextTimeoutEnabled (which makes go-redis ignore
	// context deadlines on socket reads): such calls run in a goroutine
	// that the Store stops waiting for; the goroutine ends when go-redis's
	// own ReadTimeout fires. Build the client with ContextTimeoutEnabled to
	// spare that goroutine (a redis.Client; a ClusterClient always gets one,
	// since it may look up its command table under a context of its own). A counting call that timed out may still run
	// when a slow Redis catches up: it counted at most once. A ctx
	// cancelled (not timed out) during a call on a client with
	// ContextTimeoutEnabled is noticed when Redis answers or at Timeout,
	// whichever comes first: go-redis turns a context's deadline into a
	// socket deadline, but not its cancellation. Default 50 ms. Negative is
	// invalid.
	Timeout time.Duration

	// Clock is the time source: ServerClock (default) or LocalClock(f).
	Clock Clock

	// OnTime, if not nil, is called with the time by Clock (Redis's TIME,
	// with ServerClock: on a Cluster, the TIME of the node that holds the
	// call's key, so calls on keys of different nodes report different
	// clocks when the nodes' clocks differ) at which a call's script ran, in whole
	// milliseconds, after every Hit, Inc, Refund, Undo, Get, ExpiresAt and
	// State that Redis answered. A caller that reports how long until a
	// window ends (a ResetAt) can measure it on the clock the window is
	// on, rather than on its own, which may differ from Redis's. It is
	// called on the caller's goroutine, holding no lock, and must be safe
	// for concurrent use. Default nil.
	OnTime func(time.Time)

	// DedupWindow decides what happens to a counting call (Hit, Inc) whose
	// reply is lost after Redis may have run it: a retry must not count it
	// twice.
	//
	// Zero, the default: counting calls are never retried once they may
	// have reached Redis, whatever the client's MaxRetries (calls that
	// failed before anything was sent, and Redis replies that mean the
	// script did not run, such as TRYAGAIN or LOADING, are still retried).
	// Such a call returns ErrUnavailable; it counted at most once.
	//
	// Positive: each counting call carries a request id, which the script
	// remembers with its reply for DedupWindow; go-redis may then retry
	// (client MaxRetries), and a retry of a call that was counted returns
	// the first reply instead of counting again, so the caller gets its
	// answer. It costs one small Redis key per counted call for
	// DedupWindow and about twice the Redis CPU per counted call
	// (bench/results/REDIS.md).
	// It must be a whole number of milliseconds and at least Timeout
	// (go-redis writes every retry of a call within the call's Timeout).
	// Redis may still run a retry later, if it stalls (a fork, a slow
	// command, a paused VM) right after the lost reply: a retry that runs
	// after its request id has expired counts again. Choose it above the
	// longest stall you expect of your Redis; 1 second covers ordinary
	// ones. Negative is invalid.
	DedupWindow time.Duration
}

// Store is a ratedb backend on one Redis deployment (a server, a Sentinel
// group or a Cluster, through any redis.UniversalClient). It holds no state
// of its own besides its options: every count lives in Redis. A Store is
// safe for concurrent use.
type Store struct {
	c       redis.UniversalClient
	prefix  string
	timeout time.Duration
	now     func() time.Time // nil: ServerClock
	onTime  func(time.Time)  // Options.OnTime
	dedupMS string           // DedupWindow in ms; "" when off (counting calls are not retried)
	inline  bool             // the client honours context deadlines itself

	idBase string        // random per Store, so request ids never collide across Stores
	idSeq  atomic.Uint64 // per call
}

// New returns a Store on client, which the caller owns (and closes): the
// Store never closes it. nil opts means all defaults. New returns an error
// wrapping ratedb.ErrInvalidArgument for a nil client or invalid options,
// reporting every invalid field at once. It does not contact Redis.
func New(client redis.UniversalClient, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: redisstore: "+format, append([]any{ratedb.ErrInvalidArgument}, args...)...))
	}
	if client == nil {
		bad("nil client")
	} else if v := reflect.ValueOf(client); v.Kind() == reflect.Pointer && v.IsNil() {
		bad("nil client (a nil %T)", client)
	}
	if strings.ContainsAny(o.Prefix, "{}") {
		bad("Options.Prefix holds '{' or '}'")
	}
	if o.Timeout < 0 {
		bad("Options.Timeout %v is negative", o.Timeout)
	}
	if o.DedupWindow < 0 {
		bad("Options.DedupWindow %v is negative", o.DedupWindow)
	}
	if o.DedupWindow > 0 && o.DedupWindow < o.Timeout {
		bad("Options.DedupWindow %v is shorter than Options.Timeout %v", o.DedupWindow, o.Timeout)
	}
	if o.DedupWindow > 0 && o.DedupWindow%time.Millisecond != 0 {
		bad("Options.DedupWindow %v is not a whole number of milliseconds", o.DedupWindow)
	}
	if o.Clock.isNil {
		bad("Options.Clock is LocalClock(nil)")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("redisstore: request id seed: %w", err)
	}
	s := &Store{
		c:       client,
		prefix:  o.Prefix,
		timeout: o.Timeout,
		now:     o.Clock.now,
		onTime:  o.OnTime,
		inline:  honoursDeadlines(client),
		idBase:  hex.EncodeToString(seed[:]) + ".",
	}
	if o.DedupWindow > 0 {
		s.dedupMS = strconv.FormatInt(o.DedupWindow.Milliseconds(), 10)
	}
	return s, nil
}

// honoursDeadlines reports whether client applies context deadlines to its
// socket I/O (ContextTimeoutEnabled), so that a call can run on the
// caller's goroutine under the Store's deadline.
//
// A ClusterClient never qualifies: before a command it may look up the
// cluster's command table under a context of its own (5 seconds in go-redis
// v9), so a call can outlast its deadline while a node does not answer.
//
// A read or write timeout of -2 (go-redis then never sets a socket
// deadline, the context's included; its Options hold -1 once the client is
// built) disqualifies it too.
func honoursDeadlines(client redis.UniversalClient) bool {
	if c, ok := client.(*redis.Client); ok {
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	}
	return false
}

// nowArg is the time argument of a script: "" (read TIME) for ServerClock,
// else the local clock in Unix milliseconds. A local reading outside the
// range the embedded DB accepts (1970-01-01 to the end of year 9999) gives
// an error wrapping ratedb.ErrClockOutOfRange, as the embedded DB does.
func (s *Store) nowArg() (string, error) {
	if s.now == nil {
		return "", nil
	}
	t := s.now()
	if t.Before(minTime) || !t.Before(maxTime) { // not UnixMilli, which wraps far from 1970
		return "", fmt.Errorf("%w: the clock reads %s", ratedb.ErrClockOutOfRange, t.UTC().Format(time.RFC3339Nano))
	}
	return strconv.FormatInt(t.UnixMilli(), 10), nil
}

// minTime is the first instant of the clock's range.
var minTime = time.UnixMilli(0)

// maxTime is the first instant past the clock's range.
var maxTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)

// ran reports a script's time (Unix milliseconds) to Options.OnTime.
func (s *Store) ran(ms int64) {
	if s.onTime != nil {
		s.onTime(time.UnixMilli(ms))
	}
}

// requestID returns a new id for a counted call, "" if deduplication is
// off.
func (s *Store) requestID() string {
	if s.dedupMS == "" {
		return ""
	}
	return s.idBase + strconv.FormatUint(s.idSeq.Add(1), 36)
}

// errOverflow is the error a script returns for an Inc past MaxCount,
// followed by the tier's index.
const errOverflow = "RATEDB_OVERFLOW "

// run runs sc (see eval; once: never resend it once it may have run)
// within the Store's timeout and maps its failures, every one wrapped with
// ErrUnavailable: the caller's context ending, or no answer within Timeout
// (context.DeadlineExceeded), each also wrapping what the call last met if
// it knows (a Redis reply such as BUSY or LOADING, a network error); any
// other Redis or network error as it is.
func (s *Store) run(ctx context.Context, sc *script, once bool, keys []string, args ...any) (any, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var v any
	var err error
	if s.inline {
		v, err = s.eval(cctx, sc, keys, args, once, nil)
	} else {
		type answer struct {
			v   any
			err error
		}
		ch := make(chan answer, 1)
		var seen atomic.Pointer[error]
		go func() {
			v, err := s.eval(cctx, sc, keys, args, once, &seen)
			ch <- answer{v, err}
		}()
		select {
		case a := <-ch:
			v, err = a.v, a.err
		case <-cctx.Done():
			// The call may still be waiting for Redis; what Redis
			// answered before (BUSY, LOADING) is what happened.
			err = cctx.Err()
			if p := seen.Load(); p != nil {
				err = *p
			}
		}
	}
	if err == nil {
		return v, nil
	}
	return nil, s.failure(ctx, cctx, err)
}

// failure is run's error for err, the error of a call under cctx, the
// Store's deadline on the caller's ctx. A deadline counts as passed once
// the clock reads it, even if its context does not say so yet: go-redis
// sets a socket deadline from it, whose timeout can come first.
func (s *Store) failure(ctx, cctx context.Context, err error) error {
	now := time.Now()
	passed := func(c context.Context) bool {
		d, ok := c.Deadline()
		return ok && !now.Before(d)
	}
	var ended error // the context error that ended the call
	msg := "redisstore"
	switch {
	case ctx.Err() != nil:
		ended = ctx.Err()
	case passed(ctx):
		ended = context.DeadlineExceeded
	case cctx.Err() != nil || passed(cctx):
		ended = context.DeadlineExceeded
		msg = fmt.Sprintf("redisstore: gave up after %v", s.timeout)
	default:
		return fmt.Errorf("%w: redisstore: %w", ratedb.ErrUnavailable, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: %w", ratedb.ErrUnavailable, msg, ended) // nothing more is known
	}
	return fmt.Errorf("%w: %s: %w: %w", ratedb.ErrUnavailable, msg, ended, err)
}

// overflowTier reports whether err is a script's overflow error and, of the
// tiers it names (in storage order), the first in the order pos maps from
// (nil: storage order).
func overflowTier(err error, pos []int) (int, bool) {
	var re redis.Error
	if !errors.As(err, &re) || !strings.HasPrefix(re.Error(), errOverflow) {
		return 0, false
	}
	first := -1
	for _, f := range strings.Fields(strings.TrimPrefix(re.Error(), errOverflow)) {
		i, _ := strconv.Atoi(f)
		if j := slices.Index(pos, i); j >= 0 {
			i = j
		}
		if first < 0 || i < first {
			first = i
		}
	}
	return max(first, 0), true
}

// spec is what a Window or Layered limiter is: an algorithm and one scale
// per tier, named in its keys by suffix.
type spec struct {
	s      *Store
	alg    ratedb.Algorithm
	scales []int64 // ms
	suffix string
}

func (s *Store) newSpec(alg ratedb.Algorithm, scales []int64, layered bool) *spec {
	return &spec{s: s, alg: alg, scales: scales, suffix: specSuffix(alg, scales, layered)}
}

// tierState is one tier after a count: its count, window end and whether
// the increment fitted.
type tierState struct {
	count, end int64
	fits       bool
}

// countArgs returns the keys and arguments of countScript for key: a hit
// checked against lims (one per tier) when hit is true, else an Inc.
func (sp *spec) countArgs(now, key string, hit bool, increment int64, lims []int64) ([]string, []any) {
	head := sp.s.tagged(key)
	keys := []string{head + sp.suffix}
	if id := sp.s.requestID(); id != "" {
		keys = append(keys, head+":r"+id)
	}
	mode := "i"
	if hit {
		mode = "h"
		increment = min(increment, MaxCount+1) // larger never fits either
	}
	args := make([]any, 0, 5+3*len(sp.scales))
	args = append(args, now, int(sp.alg), mode, increment)
	for i, sc := range sp.scales {
		lim := int64(0)
		if hit {
			lim = min(lims[i], MaxCount)
		}
		args = append(args, sc, sp.offset(key, sc), lim)
	}
	if len(keys) == 2 {
		args = append(args, sp.s.dedupMS)
	}
	return keys, args
}

// count runs countScript for key (see countArgs). It returns whether the
// hit was allowed, the script's now and every tier's state. pos maps the
// tiers in the order the caller gave them to storage order (Layered.pos;
// nil for a Window), for errors.
func (sp *spec) count(ctx context.Context, key string, hit bool, increment int64, lims []int64, pos []int) (bool, int64, []tierState, error) {
	now, err := sp.s.nowArg()
	if err != nil {
		return false, 0, nil, err
	}
	keys, args := sp.countArgs(now, key, hit, increment, lims)
	sc := countScript
	if len(keys) == 1 && len(sp.scales) == 1 {
		sc = windowScript
	}
	v, err := sp.s.run(ctx, sc, sp.s.dedupMS == "", keys, args...)
	if err != nil {
		// The tier is named as the caller gave it (the embedded DB's
		// Layered.Inc names the first such tier); a Window (nil pos) has none.
		if i, ok := overflowTier(err, pos); ok {
			if pos == nil {
				return false, 0, nil, fmt.Errorf("%w: increment %d would overflow the count", ratedb.ErrInvalidArgument, increment)
			}
			return false, 0, nil, fmt.Errorf("%w: increment %d would overflow tier %d's count", ratedb.ErrInvalidArgument, increment, i)
		}
		return false, 0, nil, err
	}
	allowed, t, ts, err := decodeCount(v, len(sp.scales))
	if err == nil {
		sp.s.ran(t)
	}
	return allowed, t, ts, err
}

// read returns every tier's count and end as the key's stored value holds
// them (zero for a tier with no open window) and the script's now.
func (sp *spec) read(ctx context.Context, key string) ([]tierState, error) {
	now, err := sp.s.nowArg()
	if err != nil {
		return nil, err
	}
	v, err := sp.s.run(ctx, readScript, false, []string{sp.s.tagged(key) + sp.suffix}, now)
	if err != nil {
		return nil, err
	}
	ts, err := decodeRead(v, sp.scales)
	if err == nil {
		sp.s.ran(v.([]any)[0].(int64)) // decodeRead checked both
	}
	return ts, err
}

// refund runs refundScript on key's counter, once (a refund resent would
// give back twice), and returns every tier's count and end after it (zero
// for a tier with no open window), in storage order. For an undo, ends
// holds the end of each tier's window the undone hit counted in (storage
// order), and only tiers whose window still ends there give amount back.
func (sp *spec) refund(ctx context.Context, key string, amount int64, ends ...int64) ([]tierState, error) {
	now, err := sp.s.nowArg()
	if err != nil {
		return nil, err
	}
	args := append(make([]any, 0, 3+len(sp.scales)+len(ends)), now, min(amount, MaxCount), len(sp.scales))
	for _, sc := range sp.scales {
		args = append(args, sc)
	}
	for _, e := range ends {
		args = append(args, e)
	}
	v, err := sp.s.run(ctx, refundScript, true, []string{sp.s.tagged(key) + sp.suffix}, args...)
	if err != nil {
		return nil, err
	}
	ts, err := decodeRefund(v, len(sp.scales))
	if err == nil {
		sp.s.ran(v.([]any)[0].(int64)) // decodeRefund checked both
	}
	return ts, err
}

// reset deletes key's counter.
func (sp *spec) reset(ctx context.Context, key string) error {
	// A clock reading out of range is refused, as by every call of the
	// embedded DB, though a reset reads no time.
	if _, err := sp.s.nowArg(); err != nil {
		return err
	}
	// Sent once: a DEL resent after a lost reply would erase hits counted
	// since the first one ran.
	_, err := sp.s.run(ctx, resetScript, true, []string{sp.s.tagged(key) + sp.suffix})
	return err
}

// offset is key's stagger offset for a tier of scale ms (0 unless
// StaggeredWindow): the embedded DB's, so a key resets at the same instant
// on either backend.
func (sp *spec) offset(key string, scale int64) int64 {
	if sp.alg != ratedb.StaggeredWindow {
		return 0
	}
	return limits.StaggerOffset(key, scale)
}

// badReply reports a reply of the wrong shape (another program wrote our
// key, or a script version mismatch); no decision was made.
func badReply(v any) error {
	return fmt.Errorf("%w: redisstore: unexpected reply of type %T", ratedb.ErrUnavailable, v)
}
