package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-chi/httprate"
	"github.com/ratedb/ratedb"
	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

// Config is the quota every limiter under test is built with: at most Limit
// hits per key per Window. Limiters that refill continuously (token buckets,
// GCRA) get the same average rate and a burst of Limit.
type Config struct {
	// Limit is the number of hits allowed per key per Window. AllowAll
	// makes every timed hit allowed; 1 with one hit already taken makes
	// every timed hit denied.
	Limit int64
	// Window is the window length (or refill period for Limit tokens).
	Window time.Duration
	// Dir is a directory the limiter may create files in. Only the ratedb
	// limiter with persistence uses it.
	Dir string
	// MaxHotKeys is passed to ratedb's Options.MaxHotKeys; 0 means ratedb's
	// default. Peers keep every key in memory and ignore it.
	MaxHotKeys int64
}

// AllowAll is a limit large enough that no benchmark run reaches it.
const AllowAll = int64(1) << 40

// DefaultWindow is the window of every benchmark: one day, so that no run
// crosses a window boundary except by bad luck at midnight UTC (the smoke
// tests check the decisions).
const DefaultWindow = 24 * time.Hour

// Limiter is the common face of the limiters under test. Methods are safe
// for concurrent use.
type Limiter interface {
	// Allow counts one hit against key and reports whether it was allowed.
	Allow(key string) (bool, error)
	// Present reports whether the limiter holds state for key, without
	// counting a hit.
	Present(key string) (bool, error)
	// Settle finishes background work caused by the setup, so that the
	// timed part starts from a steady state. For ratedb with a file it
	// takes a snapshot; for the others it does nothing.
	Settle() error
	// Close releases the limiter.
	Close() error
}

// Factory builds one kind of limiter.
type Factory struct {
	// Name is the limiter's name in benchmark names and tables.
	Name string
	// Desc says what exactly is measured.
	Desc string
	// Peer is false for ratedb itself.
	Peer bool
	// New builds a limiter.
	New func(cfg Config) (Limiter, error)
}

// Factories lists every limiter under test, ratedb first.
var Factories = []Factory{
	{Name: "RatedbFile", Desc: "ratedb, FixedWindow, persistence on (file, default 1 s snapshots)", New: newRatedbFile},
	{Name: "RatedbMem", Desc: "ratedb, FixedWindow, memory only", New: newRatedbMem},
	{Name: "MutexMap", Desc: "sync.Mutex + map[string]*counter fixed window (floor)", Peer: true, New: newMutexMap},
	{Name: "GoLimiter", Desc: "github.com/sethvargo/go-limiter memorystore", Peer: true, New: newGoLimiter},
	{Name: "Throttled", Desc: "github.com/throttled/throttled/v2 GCRA + memstore (map, no LRU)", Peer: true, New: newThrottled},
	{Name: "XTimeRate", Desc: "golang.org/x/time/rate, one *rate.Limiter per key in a sync.Map", Peer: true, New: newXTimeRate},
	{Name: "Httprate", Desc: "github.com/go-chi/httprate local counter (sliding window, as OnLimit drives it: two clock reads, check+increment under one mutex)", Peer: true, New: newHttprate},
	{Name: "Ulule", Desc: "github.com/ulule/limiter/v3 memory store", Peer: true, New: newUlule},
}

// FactoryByName returns the factory called name.
func FactoryByName(name string) (Factory, error) {
	for _, f := range Factories {
		if f.Name == name {
			return f, nil
		}
	}
	return Factory{}, fmt.Errorf("bench: unknown limiter %q", name)
}

// ---- ratedb ----

type ratedbLimiter struct {
	db    *ratedb.DB
	w     *ratedb.Window
	limit int64
	ctx   context.Context
}

func newRatedbFile(cfg Config) (Limiter, error) {
	dir := cfg.Dir
	if dir == "" {
		return nil, fmt.Errorf("bench: RatedbFile needs Config.Dir")
	}
	f, err := os.CreateTemp(dir, "ratedb-*.db")
	if err != nil {
		return nil, err
	}
	path := f.Name()
	_ = f.Close()
	_ = os.Remove(path)
	return openRatedb(path, cfg)
}

func newRatedbMem(cfg Config) (Limiter, error) { return openRatedb("", cfg) }

func openRatedb(path string, cfg Config) (*ratedbLimiter, error) {
	db, err := ratedb.Open(path, &ratedb.Options{MaxHotKeys: cfg.MaxHotKeys})
	if err != nil {
		return nil, err
	}
	w, err := db.Window(ratedb.FixedWindow, cfg.Window)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &ratedbLimiter{db: db, w: w, limit: cfg.Limit, ctx: context.Background()}, nil
}

func (l *ratedbLimiter) Allow(key string) (bool, error) {
	r, err := l.w.Hit(l.ctx, key, l.limit, 1)
	return r.Allowed, err
}

func (l *ratedbLimiter) Present(key string) (bool, error) {
	n, err := l.w.Get(l.ctx, key)
	return n > 0, err
}

// Count returns key's count in the current window (the counter interface
// Steady checks).
func (l *ratedbLimiter) Count(key string) (int64, error) { return l.w.Get(l.ctx, key) }

func (l *ratedbLimiter) Settle() error { return l.db.Snapshot() }
func (l *ratedbLimiter) Close() error  { return l.db.Close() }

// ---- sync.Mutex + map ----

type mutexMap struct {
	mu     sync.Mutex
	m      map[string]*fixedCounter
	limit  int64
	window int64
}

type fixedCounter struct{ count, end int64 }

func newMutexMap(cfg Config) (Limiter, error) {
	return &mutexMap{m: make(map[string]*fixedCounter), limit: cfg.Limit, window: int64(cfg.Window)}, nil
}

func (l *mutexMap) Allow(key string) (bool, error) {
	now := time.Now().UnixNano()
	l.mu.Lock()
	c := l.m[key]
	if c == nil {
		c = &fixedCounter{}
		l.m[key] = c
	}
	if c.end <= now {
		c.count, c.end = 0, now-now%l.window+l.window
	}
	ok := c.count < l.limit
	if ok {
		c.count++
	}
	l.mu.Unlock()
	return ok, nil
}

func (l *mutexMap) Present(key string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[key] != nil, nil
}

// Count returns key's count in the current window (the counter interface
// Steady checks).
func (l *mutexMap) Count(key string) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.m[key]; c != nil && c.end > time.Now().UnixNano() {
		return c.count, nil
	}
	return 0, nil
}

func (l *mutexMap) Settle() error { return nil }
func (l *mutexMap) Close() error  { return nil }

// ---- sethvargo/go-limiter ----

type goLimiter struct {
	s   golimiter.Store
	ctx context.Context
}

func newGoLimiter(cfg Config) (Limiter, error) {
	s, err := memorystore.New(&memorystore.Config{Tokens: uint64(cfg.Limit), Interval: cfg.Window})
	if err != nil {
		return nil, err
	}
	return &goLimiter{s: s, ctx: context.Background()}, nil
}

func (l *goLimiter) Allow(key string) (bool, error) {
	_, _, _, ok, err := l.s.Take(l.ctx, key)
	return ok, err
}

func (l *goLimiter) Present(key string) (bool, error) {
	tokens, _, err := l.s.Get(l.ctx, key) // 0 tokens: no bucket
	return tokens > 0, err
}

// Count returns the tokens key's bucket has given out (the counter
// interface Steady checks).
func (l *goLimiter) Count(key string) (int64, error) {
	tokens, remaining, err := l.s.Get(l.ctx, key)
	return int64(tokens - remaining), err
}

func (l *goLimiter) Settle() error { return nil }
func (l *goLimiter) Close() error  { return l.s.Close(l.ctx) }

// ---- throttled GCRA ----

type throttledLimiter struct {
	ms  *memstore.MemStore
	rl  *throttled.GCRARateLimiterCtx
	ctx context.Context
}

func newThrottled(cfg Config) (Limiter, error) {
	ms, err := memstore.New(0) // 0: a plain map, no LRU bound
	if err != nil {
		return nil, err
	}
	q := throttled.RateQuota{MaxRate: throttled.PerDuration(int(cfg.Limit), cfg.Window), MaxBurst: int(cfg.Limit) - 1}
	rl, err := throttled.NewGCRARateLimiterCtx(throttled.WrapStoreWithContext(ms), q)
	if err != nil {
		return nil, err
	}
	return &throttledLimiter{ms: ms, rl: rl, ctx: context.Background()}, nil
}

func (l *throttledLimiter) Allow(key string) (bool, error) {
	limited, _, err := l.rl.RateLimitCtx(l.ctx, key, 1)
	return !limited, err
}

func (l *throttledLimiter) Present(key string) (bool, error) {
	v, _, err := l.ms.GetWithTime(key) // -1: absent
	return v != -1, err
}

func (l *throttledLimiter) Settle() error { return nil }
func (l *throttledLimiter) Close() error  { return nil }

// ---- golang.org/x/time/rate ----

type xTimeRate struct {
	m     sync.Map // string -> *rate.Limiter
	r     rate.Limit
	burst int
}

func newXTimeRate(cfg Config) (Limiter, error) {
	return &xTimeRate{r: rate.Limit(float64(cfg.Limit) / cfg.Window.Seconds()), burst: int(cfg.Limit)}, nil
}

func (l *xTimeRate) Allow(key string) (bool, error) {
	v, ok := l.m.Load(key)
	if !ok {
		v, _ = l.m.LoadOrStore(key, rate.NewLimiter(l.r, l.burst))
	}
	return v.(*rate.Limiter).Allow(), nil
}

func (l *xTimeRate) Present(key string) (bool, error) {
	_, ok := l.m.Load(key)
	return ok, nil
}

func (l *xTimeRate) Settle() error { return nil }
func (l *xTimeRate) Close() error  { return nil }

// ---- go-chi/httprate local counter ----

// httprateLimiter drives httprate's exported in-memory LimitCounter the way
// httprate.RateLimiter.OnLimit (v0.16.1) does, without the HTTP request and
// response that OnLimit needs: a clock read for the window the hit is
// counted in, then, under one mutex, calculateRate's clock read of its own
// and its sliding-window estimate from the current and previous window,
// then IncrementBy. Two clock reads a hit, as in OnLimit.
type httprateLimiter struct {
	mu     sync.Mutex
	c      httprate.LimitCounter
	limit  int
	window time.Duration
	now    func() time.Time // time.Now; a test counts the reads
}

func newHttprate(cfg Config) (Limiter, error) {
	return &httprateLimiter{c: httprate.NewLocalLimitCounter(cfg.Window), limit: int(cfg.Limit), window: cfg.Window, now: time.Now}, nil
}

func (l *httprateLimiter) Allow(key string) (bool, error) {
	win := l.now().UTC().Truncate(l.window) // OnLimit's currentWindow
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now().UTC() // calculateRate's
	cur := now.Truncate(l.window)
	c, p, err := l.c.Get(key, cur, cur.Add(-l.window))
	if err != nil {
		return false, err
	}
	w := float64(l.window)
	r := float64(p)*(w-float64(now.Sub(cur)))/w + float64(c)
	if int(math.Round(r))+1 > l.limit {
		return false, nil
	}
	return true, l.c.IncrementBy(key, win, 1)
}

func (l *httprateLimiter) Present(key string) (bool, error) {
	cur := time.Now().UTC().Truncate(l.window)
	l.mu.Lock()
	defer l.mu.Unlock()
	c, p, err := l.c.Get(key, cur, cur.Add(-l.window))
	return c+p > 0, err
}

func (l *httprateLimiter) Settle() error { return nil }
func (l *httprateLimiter) Close() error  { return nil }

// ---- ulule/limiter ----

type ululeLimiter struct {
	l   *ulule.Limiter
	ctx context.Context
}

func newUlule(cfg Config) (Limiter, error) {
	s := ululemem.NewStore()
	return &ululeLimiter{l: ulule.New(s, ulule.Rate{Period: cfg.Window, Limit: cfg.Limit}), ctx: context.Background()}, nil
}

func (l *ululeLimiter) Allow(key string) (bool, error) {
	c, err := l.l.Get(l.ctx, key)
	return !c.Reached, err
}

func (l *ululeLimiter) Present(key string) (bool, error) {
	c, err := l.l.Peek(l.ctx, key)
	return c.Remaining < c.Limit, err
}

func (l *ululeLimiter) Settle() error { return nil }
func (l *ululeLimiter) Close() error  { return nil }

// tempDir returns a fresh directory under the system temp dir and a function
// removing it.
func tempDir() (string, func(), error) {
	d, err := os.MkdirTemp("", "ratedb-bench-")
	if err != nil {
		return "", nil, err
	}
	return filepath.Clean(d), func() { _ = os.RemoveAll(d) }, nil
}
