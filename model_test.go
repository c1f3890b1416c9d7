package ratedb_test

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
)

// The model test runs random sequences of operations against a DB and against
// a reference model (a map and arithmetic), and compares every answer. It
// runs with a tiny MaxHotKeys so that windows constantly spill to the file and
// reload, across every algorithm and several scales, with the clock moving
// forwards and backwards, snapshots, janitor passes, graceful restarts and
// simulated crashes.
//
//	go test -run TestModel -model.seeds=10000      # more seeds
//	go test -run TestModel -model.seed=1234 -v     # replay one seed
var (
	modelSeeds = flag.Int("model.seeds", 300, "number of random seeds TestModel runs (a third under -short)")
	modelSeed  = flag.Int64("model.seed", -1, "run TestModel for this one seed only")
	modelOps   = flag.Int("model.ops", 250, "operations per TestModel seed")
	modelFirst = flag.Int64("model.first", 1, "first seed TestModel runs")
)

// mClock is a settable clock, safe for concurrent use.
type mClock struct {
	mu sync.Mutex
	ms int64
}

func (c *mClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.UnixMilli(c.ms)
}

func (c *mClock) set(ms int64) {
	c.mu.Lock()
	c.ms = ms
	c.mu.Unlock()
}

func (c *mClock) get() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ms
}

// mFloorDiv is a/b rounded towards negative infinity (b > 0).
func mFloorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// mStagger is the documented StaggeredWindow offset: 64-bit FNV-1a of the
// key, modulo the scale.
func mStagger(key string, scale int64) int64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return int64(h % uint64(scale))
}

// mNextEnd is the end of the window a hit at now opens when none is open.
func mNextEnd(alg ratedb.Algorithm, key string, now, scale int64) int64 {
	switch alg {
	case ratedb.PerKeyWindow:
		return now + scale
	case ratedb.StaggeredWindow:
		off := mStagger(key, scale)
		return mFloorDiv(now-off, scale)*scale + scale + off
	}
	return mFloorDiv(now, scale)*scale + scale
}

// mWin is the model of one key's window: count hits in a window ending at
// end (exclusive). cleanable marks a window a janitor pass may have removed
// (it had ended when the pass ran): it matters only if the clock steps back
// before its end, and then resolve asks the DB.
type mWin struct {
	count, end int64
	cleanable  bool
}

// mCap is the documented cap: a window never ends more than one scale after
// now.
func mCap(w mWin, now, scale int64) mWin {
	w.end = min(w.end, now+scale)
	return w
}

// mLim is the model of one Window limiter.
type mLim struct {
	alg   ratedb.Algorithm
	scale int64
	wins  map[string]mWin
}

func (l *mLim) clone() *mLim {
	c := &mLim{alg: l.alg, scale: l.scale, wins: make(map[string]mWin, len(l.wins))}
	for k, v := range l.wins {
		c.wins[k] = v
	}
	return c
}

// capStore caps key's stored window at now, as every call that acquires a
// key does.
func (l *mLim) capStore(key string, now int64) {
	if w, ok := l.wins[key]; ok {
		l.wins[key] = mCap(w, now, l.scale)
	}
}

// current returns key's count and end at now: the open window, or an empty
// one that a hit at now would open.
func (l *mLim) current(key string, now int64) (int64, int64) {
	if w, ok := l.wins[key]; ok && now < w.end {
		return w.count, w.end
	}
	return 0, mNextEnd(l.alg, key, now, l.scale)
}

// mLay is the model of one Layered limiter: one window per tier, all or
// nothing.
type mLay struct {
	alg   ratedb.Algorithm
	tiers []ratedb.Tier
	wins  map[string][]mWin // one per tier; absent: no window in any tier
}

func (l *mLay) clone() *mLay {
	c := &mLay{alg: l.alg, tiers: l.tiers, wins: make(map[string][]mWin, len(l.wins))}
	for k, v := range l.wins {
		c.wins[k] = append([]mWin(nil), v...)
	}
	return c
}

func (l *mLay) scale(i int) int64 { return l.tiers[i].Scale.Milliseconds() }

// capStore caps every tier of key's stored windows at now.
func (l *mLay) capStore(key string, now int64) {
	for i, w := range l.wins[key] {
		l.wins[key][i] = mCap(w, now, l.scale(i))
	}
}

// current returns tier i's count and end at now, as mLim.current does.
func (l *mLay) current(key string, i int, now int64) (int64, int64) {
	if ws, ok := l.wins[key]; ok && now < ws[i].end {
		return ws[i].count, ws[i].end
	}
	return 0, mNextEnd(l.alg, key, now, l.scale(i))
}

// modelRun is one seed's run: the DB under test, the model and the
// environment (clock, file, crash image).
type modelRun struct {
	t      *testing.T
	seed   int64
	rng    *rand.Rand
	clock  *mClock
	dir    string
	path   string // "" in memory-only mode
	image  string // copy of the file as of the last committed snapshot or Close
	opts   ratedb.Options
	db     *ratedb.DB
	ws     []*ratedb.Window
	lims   []*mLim
	commit []*mLim // model state as of the image
	lays   []*mLay // Layered limiters (none in some seeds)
	ls     []*ratedb.Layered
	lcomm  []*mLay // Layered model state as of the image
	keys   []string
	log    []string // operations so far, for the failure message

	allowed, denied int64 // Hit decisions since the DB was opened

	// hits and lhits hold the last allowed Hit on each key of each Window
	// and each Layered limiter, for Undo.
	hits, lhits map[mHitKey]mHit
}

// mHitKey names a key of one of the run's Windows.
type mHitKey struct {
	li  int
	key string
}

// mHit is an allowed Hit: its Result and increment.
type mHit struct {
	r   ratedb.Result
	inc int64
}

func TestModel(t *testing.T) {
	if *modelSeed >= 0 {
		runModelSeed(t, *modelSeed, *modelOps)
		return
	}
	n := *modelSeeds
	if testing.Short() {
		n = max(1, n/3)
	}
	first := *modelFirst
	for seed := first; seed < first+int64(n); seed++ {
		if !runModelSeed(t, seed, *modelOps) {
			return
		}
	}
}

// runModelSeed runs one seed and reports whether it passed.
func runModelSeed(t *testing.T, seed int64, ops int) (ok bool) {
	t.Helper()
	if seed%3 == 0 {
		// Blocks of about six windows: a seed's few windows then split
		// blocks, and janitor passes merge them.
		defer ratedb.SetMaxBlockBytes(200)()
	}
	m := newModelRun(t, seed)
	defer m.cleanup()
	defer func() {
		if !ok {
			t.Logf("seed %d failed; replay with: go test -run 'TestModel$' -model.seed=%d -model.ops=%d -v", seed, seed, ops)
		}
	}()
	for i := 0; i < ops; i++ {
		if err := m.step(); err != nil {
			m.fail(err)
			return false
		}
	}
	if err := m.checkAll(); err != nil {
		m.fail(err)
		return false
	}
	if m.path != "" {
		// A graceful restart loses nothing.
		if err := m.reopen(false); err != nil {
			m.fail(err)
			return false
		}
		if err := m.checkAll(); err != nil {
			m.fail(fmt.Errorf("after final reopen: %w", err))
			return false
		}
	}
	return true
}

func (m *modelRun) fail(err error) {
	m.t.Helper()
	start := max(0, len(m.log)-40)
	m.t.Errorf("model seed %d: %v\nlast operations:\n  %s", m.seed, err, strings.Join(m.log[start:], "\n  "))
}

func newModelRun(t *testing.T, seed int64) *modelRun {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	m := &modelRun{t: t, seed: seed, rng: rng, clock: &mClock{}}
	// Start somewhere around 2026, not on a round boundary.
	start := int64(1_767_225_600_000) + rng.Int64N(1_000_000)
	m.clock.set(start)
	m.dir = t.TempDir()
	if rng.IntN(8) != 0 {
		m.path = filepath.Join(m.dir, fmt.Sprintf("model-%d.db", seed))
	}
	hot := []int64{1, 2, 4, 8, 16}[rng.IntN(5)]
	m.opts = ratedb.Options{
		Clock:          m.clock.Now,
		SnapshotPeriod: -1,
		CleanPeriod:    -1,
		MaxHotKeys:     hot,
		NoSync:         true,
		Logger:         quietLogger(),
	}
	if rng.IntN(4) == 0 {
		m.opts.KeyOlderThan = time.Duration(rng.IntN(50)) * time.Millisecond
	}
	nkeys := 2 + rng.IntN(20)
	for i := 0; i < nkeys; i++ {
		m.keys = append(m.keys, fmt.Sprintf("key-%d", i))
	}
	algs := []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow}
	scales := []int64{1, 3, 10, 50, 100, 1000, 60_000}
	nlim := 1 + rng.IntN(3)
	seen := map[[2]int64]bool{}
	for len(m.lims) < nlim {
		alg := algs[rng.IntN(len(algs))]
		sc := scales[rng.IntN(len(scales))]
		if seen[[2]int64{int64(alg), sc}] {
			continue
		}
		seen[[2]int64{int64(alg), sc}] = true
		m.lims = append(m.lims, &mLim{alg: alg, scale: sc, wins: map[string]mWin{}})
	}
	if rng.IntN(2) == 0 {
		l := &mLay{alg: algs[rng.IntN(len(algs))], wins: map[string][]mWin{}}
		used := map[int64]bool{}
		for n := 2 + rng.IntN(2); len(l.tiers) < n; {
			sc := scales[rng.IntN(len(scales))]
			if !used[sc] {
				used[sc] = true
				l.tiers = append(l.tiers, ratedb.Tier{Scale: time.Duration(sc) * time.Millisecond, Limit: rng.Int64N(15)})
			}
		}
		m.lays = append(m.lays, l)
	}
	m.logf("open path=%q MaxHotKeys=%d KeyOlderThan=%v keys=%d limiters=%s", m.path, hot, m.opts.KeyOlderThan, nkeys, m.limNames())
	m.snapCommit()
	if err := m.open(); err != nil {
		t.Fatalf("seed %d: open: %v", seed, err)
	}
	if m.path != "" {
		if err := copyFile(m.path, m.image); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	return m
}

func (m *modelRun) limNames() string {
	var b strings.Builder
	for i, l := range m.lims {
		fmt.Fprintf(&b, "[%d]%v/%dms ", i, l.alg, l.scale)
	}
	for i, l := range m.lays {
		fmt.Fprintf(&b, "[L%d]%v/%v ", i, l.alg, l.tiers)
	}
	return b.String()
}

func (m *modelRun) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf("t=%d ", m.clock.get())+fmt.Sprintf(format, args...))
}

func (m *modelRun) open() error {
	if m.path != "" {
		m.image = m.path + ".image"
	}
	db, err := ratedb.Open(m.path, &m.opts)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	m.db = db
	m.tick() // Open reads the clock
	m.allowed, m.denied = 0, 0
	m.ws = m.ws[:0]
	for _, l := range m.lims {
		w, err := db.Window(l.alg, time.Duration(l.scale)*time.Millisecond)
		if err != nil {
			return err
		}
		m.ws = append(m.ws, w)
	}
	m.ls = m.ls[:0]
	for _, l := range m.lays {
		ly, err := db.Layered(l.alg, l.tiers...)
		if err != nil {
			return err
		}
		m.ls = append(m.ls, ly)
	}
	return nil
}

func (m *modelRun) cleanup() {
	if m.db != nil {
		_ = m.db.Close()
	}
}

// snapCommit records the model state that the file now holds.
func (m *modelRun) snapCommit() {
	m.commit = m.commit[:0]
	for _, l := range m.lims {
		m.commit = append(m.commit, l.clone())
	}
	m.lcomm = m.lcomm[:0]
	for _, l := range m.lays {
		m.lcomm = append(m.lcomm, l.clone())
	}
}

// tick reads the clock the way the DB does: an injected clock is taken as
// given.
func (m *modelRun) tick() int64 { return m.clock.get() }

// resolve settles, before an operation on key at now, whether the DB still
// holds a window a janitor pass may have removed: it matters only when the
// clock stepped back before the window's end, and then ExpiresAt (which
// changes nothing) tells.
func (m *modelRun) resolve(li int, key string, now int64) error {
	l := m.lims[li]
	w, ok := l.wins[key]
	if !ok || !w.cleanable || now >= w.end {
		return nil
	}
	end, err := m.ws[li].ExpiresAt(ctx, key)
	if err != nil {
		return fmt.Errorf("ExpiresAt: %w", err)
	}
	if end.IsZero() {
		m.logf("[%d] (%s was cleaned)", li, key)
		delete(l.wins, key)
	}
	return nil
}

// resolveLayered is resolve for a Layered limiter's key.
func (m *modelRun) resolveLayered(li int, key string, now int64) error {
	l := m.lays[li]
	ws, ok := l.wins[key]
	if !ok || !ws[0].cleanable {
		return nil
	}
	open := false
	for _, w := range ws {
		open = open || now < w.end
	}
	if !open {
		return nil
	}
	ends, err := m.ls[li].ExpiresAt(ctx, key)
	if err != nil {
		return fmt.Errorf("Layered.ExpiresAt: %w", err)
	}
	for _, e := range ends {
		if !e.IsZero() {
			return nil
		}
	}
	m.logf("[L%d] (%s was cleaned)", li, key)
	delete(l.wins, key)
	return nil
}

// cleaned marks every window a janitor pass at now may remove: each whose
// windows all ended by now minus KeyOlderThan.
func (m *modelRun) cleaned(now int64) {
	cutoff := now - m.opts.KeyOlderThan.Milliseconds()
	for _, l := range m.lims {
		for k, w := range l.wins {
			if w.end <= cutoff {
				w.cleanable = true
				l.wins[k] = w
			}
		}
	}
	for _, l := range m.lays {
		for _, ws := range l.wins {
			end := int64(0)
			for _, w := range ws {
				end = max(end, w.end)
			}
			if end <= cutoff {
				for i := range ws {
					ws[i].cleanable = true
				}
			}
		}
	}
}

func (m *modelRun) step() error {
	if len(m.lays) > 0 && m.rng.IntN(3) == 0 {
		return m.stepLayered()
	}
	r := m.rng.IntN(100)
	li := m.rng.IntN(len(m.lims))
	l, w := m.lims[li], m.ws[li]
	key := m.keys[m.rng.IntN(len(m.keys))]
	switch {
	case r < 35:
		limit := m.rng.Int64N(12)
		inc := 1 + m.rng.Int64N(3)
		return m.hit(li, l, w, key, limit, inc)
	case r < 42:
		inc := 1 + m.rng.Int64N(5)
		now := m.tick()
		if err := m.resolve(li, key, now); err != nil {
			return err
		}
		m.logf("[%d] Inc(%s, %d)", li, key, inc)
		got, err := w.Inc(ctx, key, inc)
		if err != nil {
			return fmt.Errorf("Inc: %w", err)
		}
		l.capStore(key, now)
		c, end := l.current(key, now)
		l.wins[key] = mWin{count: c + inc, end: end}
		if got != c+inc {
			return fmt.Errorf("Inc(%s): got %d, model %d", key, got, c+inc)
		}
	case r < 47:
		n := m.rng.Int64N(12)
		now := m.tick()
		if err := m.resolve(li, key, now); err != nil {
			return err
		}
		m.logf("[%d] Set(%s, %d)", li, key, n)
		got, err := w.Set(ctx, key, n)
		if err != nil {
			return fmt.Errorf("Set: %w", err)
		}
		l.capStore(key, now)
		end := now + l.scale
		if l.alg != ratedb.PerKeyWindow {
			_, end = l.current(key, now)
		}
		l.wins[key] = mWin{count: n, end: end}
		if got != n {
			return fmt.Errorf("Set(%s): got %d, want %d", key, got, n)
		}
	case r < 49:
		amount := 1 + m.rng.Int64N(6)
		now := m.tick()
		if err := m.resolve(li, key, now); err != nil {
			return err
		}
		m.logf("[%d] Refund(%s, %d)", li, key, amount)
		got, end, err := w.Refund(ctx, key, amount)
		if err != nil {
			return fmt.Errorf("Refund: %w", err)
		}
		var want int64
		var wantEnd time.Time
		if mw, ok := l.wins[key]; ok && now < mw.end {
			mw = mCap(mw, now, l.scale)
			mw.count = max(0, mw.count-amount)
			l.wins[key] = mw
			want, wantEnd = mw.count, time.UnixMilli(mw.end)
		}
		if got != want || !end.Equal(wantEnd) {
			return fmt.Errorf("Refund(%s, %d): got %d until %v, model %d until %v", key, amount, got, end, want, wantEnd)
		}
	case r < 53:
		return m.undo(li, l, w, key)
	case r < 55:
		m.logf("[%d] Reset(%s)", li, key)
		if err := w.Reset(ctx, key); err != nil {
			return fmt.Errorf("Reset: %w", err)
		}
		delete(l.wins, key)
	case r < 60:
		return m.check(li, key)
	case r < 80:
		m.advance()
	case r < 87:
		m.logf("Snapshot")
		if err := m.db.Snapshot(); err != nil {
			return fmt.Errorf("Snapshot: %w", err)
		}
		if err := m.db.Verify(); err != nil { // a sound file always verifies
			return fmt.Errorf("Verify: %w", err)
		}
		if m.path != "" {
			if err := copyFile(m.path, m.image); err != nil {
				return err
			}
			m.snapCommit()
		}
	case r < 93:
		m.logf("Clean")
		if _, err := m.db.Clean(); err != nil {
			return fmt.Errorf("Clean: %w", err)
		}
		m.cleaned(m.tick())
		if err := m.db.Verify(); err != nil {
			return fmt.Errorf("Verify after Clean: %w", err)
		}
	case r < 95:
		st := m.db.Stats()
		if st.Allowed != m.allowed || st.Denied != m.denied {
			return fmt.Errorf("Stats: allowed/denied %d/%d, model %d/%d", st.Allowed, st.Denied, m.allowed, m.denied)
		}
	case r < 98:
		if m.path != "" {
			return m.reopen(false)
		}
	default:
		if m.path != "" {
			return m.reopen(true)
		}
	}
	return nil
}

func (m *modelRun) hit(li int, l *mLim, w *ratedb.Window, key string, limit, inc int64) error {
	now := m.tick()
	if err := m.resolve(li, key, now); err != nil {
		return err
	}
	m.logf("[%d] Hit(%s, limit %d, inc %d)", li, key, limit, inc)
	got, err := w.Hit(ctx, key, limit, inc)
	if err != nil {
		return fmt.Errorf("Hit: %w", err)
	}
	l.capStore(key, now)
	c, end := l.current(key, now)
	allowed := c+inc <= limit
	if allowed {
		c += inc
		l.wins[key] = mWin{count: c, end: end}
		m.allowed++
		if m.hits == nil {
			m.hits = map[mHitKey]mHit{}
		}
		m.hits[mHitKey{li, key}] = mHit{got, inc}
	} else {
		m.denied++
	}
	want := ratedb.Result{
		Allowed:   allowed,
		Count:     c,
		Limit:     limit,
		Remaining: max(0, limit-c),
		ResetAt:   time.UnixMilli(end),
		Scale:     time.Duration(l.scale) * time.Millisecond,
	}
	if !allowed {
		want.RetryAfter = time.Duration(end-now) * time.Millisecond
	}
	if got.Allowed != want.Allowed || got.Count != want.Count || got.Limit != want.Limit ||
		got.Remaining != want.Remaining || !got.ResetAt.Equal(want.ResetAt) || got.RetryAfter != want.RetryAfter ||
		got.Scale != want.Scale {
		return fmt.Errorf("[%d] Hit(%s, %d, %d) at %d:\n got  %+v\n want %+v", li, key, limit, inc, now, got, want)
	}
	return nil
}

// undo takes back the last allowed Hit on key, if there was one: the model
// gives the increment back only if the key's window, as the clock model
// caps it now, is still the one the hit counted in.
func (m *modelRun) undo(li int, l *mLim, w *ratedb.Window, key string) error {
	h, ok := m.hits[mHitKey{li, key}]
	if !ok {
		return nil
	}
	now := m.tick()
	if err := m.resolve(li, key, now); err != nil {
		return err
	}
	m.logf("[%d] Undo(%s, hit until %d, %d)", li, key, h.r.ResetAt.UnixMilli(), h.inc)
	if err := w.Undo(ctx, key, h.r, h.inc); err != nil {
		return fmt.Errorf("Undo: %w", err)
	}
	if mw, ok := l.wins[key]; ok && now < mw.end {
		if mw = mCap(mw, now, l.scale); mw.end == h.r.ResetAt.UnixMilli() {
			mw.count = max(0, mw.count-h.inc)
			l.wins[key] = mw
		}
	}
	return m.check(li, key)
}

// check compares Get and ExpiresAt of one key with the model.
func (m *modelRun) check(li int, key string) error {
	l, w := m.lims[li], m.ws[li]
	now := m.tick()
	if err := m.resolve(li, key, now); err != nil {
		return err
	}
	var wantN int64
	var wantEnd time.Time
	if mw, ok := l.wins[key]; ok && now < mw.end {
		mw = mCap(mw, now, l.scale)
		wantN, wantEnd = mw.count, time.UnixMilli(mw.end)
	}
	n, err := w.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("Get: %w", err)
	}
	end, err := w.ExpiresAt(ctx, key)
	if err != nil {
		return fmt.Errorf("ExpiresAt: %w", err)
	}
	if n != wantN || !end.Equal(wantEnd) {
		return fmt.Errorf("[%d] %v/%dms key %s at %d: Get %d ExpiresAt %d, model %d %d",
			li, l.alg, l.scale, key, now, n, msOrZero(end), wantN, msOrZero(wantEnd))
	}
	return nil
}

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func (m *modelRun) checkAll() error {
	for li := range m.lims {
		for _, k := range m.keys {
			if err := m.check(li, k); err != nil {
				return err
			}
		}
	}
	for li := range m.lays {
		for _, k := range m.keys {
			if err := m.checkLayered(li, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// advance moves the clock: mostly forwards by up to a few scales, sometimes
// backwards (a window it revives counts again, capped to end within one
// scale), sometimes far.
func (m *modelRun) advance() {
	sc := m.lims[m.rng.IntN(len(m.lims))].scale
	cur := m.clock.get()
	var d int64
	switch r := m.rng.IntN(20); {
	case r < 12:
		d = m.rng.Int64N(sc + 1)
	case r < 15:
		d = m.rng.Int64N(3*sc + 1)
	case r < 16:
		d = m.rng.Int64N(1 + 10*sc)
	case r < 17:
		d = 1
	default:
		d = -m.rng.Int64N(2*sc + 1) // backwards
	}
	m.clock.set(cur + d)
	m.logf("clock %+d -> %d", d, cur+d)
}

// reopen closes the DB and opens it again. A graceful restart (crash false)
// keeps every count. A crash drops what was not snapshotted: the DB is reopened
// from the image of the file taken at the last snapshot; the abandoned DB is
// closed (its final snapshot goes to a file nobody reads).
func (m *modelRun) reopen(crash bool) error {
	if crash {
		m.logf("Crash")
	} else {
		m.logf("Close+Reopen")
	}
	err := m.db.Close()
	m.db = nil
	if err != nil {
		return fmt.Errorf("Close: %w", err)
	}
	if crash {
		if err := copyFile(m.image, m.path); err != nil {
			return err
		}
		for i := range m.lims {
			m.lims[i] = m.commit[i].clone()
		}
		for i := range m.lays {
			m.lays[i] = m.lcomm[i].clone()
		}
	} else {
		if err := copyFile(m.path, m.image); err != nil {
			return err
		}
		m.snapCommit()
	}
	return m.open()
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := to + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, to)
}

// raceEnabled reports whether the test binary was built with -race: CI
// sizes are scaled down under it.
var raceEnabled = func() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}()

// quietLogger discards the DB's log: the model and fault tests provoke
// errors on purpose.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
