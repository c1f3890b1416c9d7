// Command crashloop proves ratedb's durability and exactness promises by
// killing a busy child process over and over and checking the file it
// leaves behind.
//
// The child hits a few keys under FixedWindow, PerKeyWindow and a Layered
// limiter as fast as it can, with periodic background snapshots and its own
// explicit snapshots running in a loop, and with a scaled clock so that
// windows roll over during the run. Before each hit it tells the parent what
// it is about to do, and after it the decision; around each of its own
// snapshots it says "began" and "committed". Messages go over a pipe, one
// write each, so the parent knows everything the child knew up to the
// moment it died.
//
// The parent kills the child with SIGKILL at a random moment (every tenth
// cycle it sends SIGTERM instead: the child then closes the DB and exits),
// and after the child is dead it checks:
//
//   - the file passes bbolt's consistency check (tx.Check), reopens, and
//     passes DB.Verify;
//   - no phantom counts: each persisted window count is at most what was
//     reported allowed in that window (plus the one hit per goroutine whose
//     decision was not yet reported);
//   - bounded loss: each persisted window holds at least what had been
//     allowed when the last committed snapshot began;
//   - a graceful stop loses nothing: the file holds exactly what was
//     allowed;
//   - across restarts, no window ever admits more than its limit counting
//     from what the file held at each restart (so the total admitted in a
//     window is at most the limit plus what crashes lost in it).
//
// Usage:
//
//	go run ./internal/crashloop -cycles 1000
//
// The same loop runs as a Go test (go test ./internal/crashloop), 50 cycles
// by default.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// Environment of the child process.
const (
	envPath = "RATEDB_CRASHLOOP_CHILD" // database path; its presence makes the process a child
	envBase = "RATEDB_CRASHLOOP_BASE"  // fake clock at start, Unix ms
	envSeed = "RATEDB_CRASHLOOP_SEED"
)

// speed is how many fake milliseconds pass per real millisecond in the child.
const speed = 20

// The limiters the child hits. Limiter 2 is Layered with two tiers.
const (
	limFixed = iota
	limPerKey
	limLayered
	numLims
)

var (
	scales = [numLims][]int64{{1000}, {700}, {1000, 3000}} // fake ms
	limits = [numLims][]int64{{30}, {20}, {15, 35}}
)

const numKeys = 6

func keyName(i int) string { return "key-" + strconv.Itoa(i) }

// recordKey is the file key of a window record: ratedb's record-key prefix
// (algorithm, and for a Layered limiter the tier count, then each scale) and
// the key.
func recordKey(lim int, key string) []byte {
	var p []byte
	switch lim {
	case limFixed:
		p = append(p, byte(ratedb.FixedWindow))
	case limPerKey:
		p = append(p, byte(ratedb.PerKeyWindow))
	case limLayered:
		p = append(p, byte(ratedb.FixedWindow)|0x80, byte(len(scales[lim])))
	}
	for _, sc := range scales[lim] {
		p = append(p, byte(sc>>56), byte(sc>>48), byte(sc>>40), byte(sc>>32), byte(sc>>24), byte(sc>>16), byte(sc>>8), byte(sc))
	}
	return append(p, key...)
}

func main() {
	if os.Getenv(envPath) != "" {
		ChildMain()
		return
	}
	var cfg Config
	flag.IntVar(&cfg.Cycles, "cycles", 100, "kill cycles to run")
	flag.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()), "random seed")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for the database (default: a temporary one)")
	flag.BoolVar(&cfg.Verbose, "v", false, "print every cycle")
	flag.Parse()
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "crashloop-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg.Child = []string{self}
	cfg.Log = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	sum, err := Run(cfg)
	fmt.Println(sum)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("PASS")
}

// Config is one crash-loop run.
type Config struct {
	Cycles  int
	Seed    uint64
	Dir     string
	Child   []string // argv that starts a child (with the environment set by Run)
	Verbose bool
	Log     func(format string, args ...any)
}

// Summary is what a run measured.
type Summary struct {
	Cycles, Kills, Graceful   int
	Allowed, Denied           int64 // decisions reported by children
	Commits                   int64 // committed snapshots reported
	Lost                      int64 // allowed counts lost at crashes (all windows)
	MaxLostAtCrash            int64
	Pending                   int64 // hits in flight at a kill whose decision was never reported
	PendingPersisted          int64 // ... whose count was found in the file anyway
	WindowsChecked, Rollovers int64
	Elapsed                   time.Duration
}

func (s Summary) String() string {
	return fmt.Sprintf("crashloop: %d cycles (%d SIGKILL, %d SIGTERM) in %v: %d allowed, %d denied, %d committed snapshots, "+
		"%d counts lost at crashes (max %d in one crash), %d unreported in-flight hits (%d of them persisted), "+
		"%d window checks, %d window rollovers",
		s.Cycles, s.Kills, s.Graceful, s.Elapsed.Round(time.Millisecond), s.Allowed, s.Denied, s.Commits,
		s.Lost, s.MaxLostAtCrash, s.Pending, s.PendingPersisted, s.WindowsChecked, s.Rollovers)
}

// lkey names one tier of one key of one limiter; wkey one window of it.
type lkey struct {
	lim, tier int
	key       int
}

type wkey struct {
	lkey
	end int64
}

type winState struct{ end, count int64 }

type pendingHit struct {
	lim, key int
	inc      int64
}

// parent is the parent's belief about the file and the child.
type parent struct {
	expected map[wkey]int64 // what the DB holds for each window (allowed since the last restart, plus what the file held then)
	total    map[wkey]int64 // everything ever reported allowed in the window
	lost     map[wkey]int64 // lost at crashes
	latest   map[lkey]int64 // end of the newest window reported per tier
	saved    map[int64]map[lkey]winState
	commit   map[lkey]winState // state as of the beginning of the last committed snapshot
	pending  map[int]pendingHit
	clock    int64         // newest child clock reported or reached
	closed   bool          // the child reported a graceful Close
	opened   chan struct{} // closed when the child reports that it is ready
	sum      *Summary
	failures []string
}

func newParent(sum *Summary) *parent {
	return &parent{
		expected: map[wkey]int64{},
		total:    map[wkey]int64{},
		lost:     map[wkey]int64{},
		latest:   map[lkey]int64{},
		saved:    map[int64]map[lkey]winState{},
		commit:   map[lkey]winState{},
		pending:  map[int]pendingHit{},
		sum:      sum,
	}
}

func (p *parent) failf(format string, args ...any) {
	if len(p.failures) < 20 {
		p.failures = append(p.failures, fmt.Sprintf(format, args...))
	}
}

// Run runs the crash loop and returns what it measured; the error lists the
// violations found.
func Run(cfg Config) (Summary, error) {
	start := time.Now()
	sum := Summary{}
	rng := rand.New(rand.NewPCG(cfg.Seed, 42))
	path := filepath.Join(cfg.Dir, "crashloop.db")
	p := newParent(&sum)
	p.clock = 1_767_225_600_000 // fake time starts at 2026-01-01
	for cycle := 0; cycle < cfg.Cycles; cycle++ {
		graceful := cycle%10 == 9
		delay := time.Duration(10+rng.IntN(190)) * time.Millisecond
		if err := p.cycle(cfg, path, cycle, graceful, delay, rng.Uint64()); err != nil {
			sum.Elapsed = time.Since(start)
			return sum, fmt.Errorf("cycle %d (seed %d): %w", cycle, cfg.Seed, err)
		}
		if len(p.failures) > 0 {
			sum.Elapsed = time.Since(start)
			return sum, fmt.Errorf("cycle %d (seed %d): %d violations:\n  %s", cycle, cfg.Seed, len(p.failures),
				joinLines(p.failures))
		}
		sum.Cycles++
		if graceful {
			sum.Graceful++
		} else {
			sum.Kills++
		}
		if cfg.Verbose && cfg.Log != nil {
			cfg.Log("cycle %d done: %v", cycle, sum)
		}
	}
	// Across restarts: no window admitted more than its limit beyond what
	// crashes lost in it.
	for w, n := range p.total {
		if lim := limits[w.lim][w.tier]; n > lim+p.lost[w] {
			p.failf("window %+v admitted %d in total, limit %d + lost %d", w, n, lim, p.lost[w])
		}
	}
	sum.Elapsed = time.Since(start)
	if len(p.failures) > 0 {
		return sum, fmt.Errorf("%d violations:\n  %s", len(p.failures), joinLines(p.failures))
	}
	return sum, nil
}

func joinLines(s []string) string {
	var b bytes.Buffer
	for i, l := range s {
		if i > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// cycle runs one child and checks the file it leaves.
func (p *parent) cycle(cfg Config, path string, cycle int, graceful bool, delay time.Duration, seed uint64) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(cfg.Child[0], cfg.Child[1:]...)
	cmd.Env = append(os.Environ(),
		envPath+"="+path,
		envBase+"="+strconv.FormatInt(p.clock, 10),
		envSeed+"="+strconv.FormatUint(seed, 10))
	cmd.ExtraFiles = []*os.File{pw}
	base, spawned := p.clock, time.Now()
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return err
	}
	pw.Close()
	p.closed = false
	clear(p.pending)

	readDone := make(chan error, 1)
	p.opened = make(chan struct{})
	go func() { readDone <- p.read(pr) }()

	// SIGKILL may land at any moment, also while the child starts or opens
	// the file; SIGTERM is sent once the child can handle it.
	stopTimer := func() bool { return true }
	if graceful {
		go func() {
			select {
			case <-p.opened:
				time.Sleep(delay)
			case <-time.After(20 * time.Second):
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}()
	} else {
		stopTimer = time.AfterFunc(delay, func() { _ = cmd.Process.Kill() }).Stop
	}
	// A child that does not stop is killed after a while: a graceful stop
	// that hangs is a failure, not a hung test.
	hang := time.AfterFunc(delay+20*time.Second, func() { _ = cmd.Process.Kill() })
	werr := cmd.Wait()
	reached := base + time.Since(spawned).Milliseconds()*speed
	stopTimer()
	hangFired := !hang.Stop()
	rerr := <-readDone
	// The next child's clock goes on from where this one's stopped, as a
	// real clock would (the child started after spawned, so this is never
	// behind it): ratedb keeps no "newest time" of its own, and a clock
	// that stepped back would be a different test (clock_test.go).
	p.clock = max(p.clock, reached)
	pr.Close()
	if rerr != nil {
		return fmt.Errorf("reading the child's reports: %w", rerr)
	}
	if hangFired {
		return fmt.Errorf("child did not stop within 20s of the signal; output:\n%s", stderr.String())
	}
	var exitErr *exec.ExitError
	switch {
	case graceful:
		if werr != nil || !p.closed {
			return fmt.Errorf("graceful stop: exit %v, closed %v; output:\n%s", werr, p.closed, stderr.String())
		}
	case werr == nil:
		// The child stops only when told to.
		return fmt.Errorf("child exited on its own; output:\n%s", stderr.String())
	case errors.As(werr, &exitErr) && exitErr.ExitCode() != -1:
		return fmt.Errorf("child failed (%v); output:\n%s", werr, stderr.String())
	}
	return p.verify(path, graceful)
}

// read consumes the child's reports until the pipe closes.
func (p *parent) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<16)
	var f [8][]byte
	for {
		line, err := br.ReadSlice('\n')
		if err == io.EOF {
			return nil // a partial last line is a write the kill cut short: no such write exists for pipes under PIPE_BUF
		}
		if err != nil {
			return err
		}
		n := fields(line[:len(line)-1], f[:])
		if n == 0 {
			continue
		}
		if err := p.event(f[:n]); err != nil {
			return fmt.Errorf("%w in %q", err, line)
		}
	}
}

func fields(b []byte, out [][]byte) int {
	n := 0
	for len(b) > 0 && n < len(out) {
		i := bytes.IndexByte(b, ' ')
		if i < 0 {
			out[n] = b
			return n + 1
		}
		out[n] = b[:i]
		n++
		b = b[i+1:]
	}
	return n
}

func atoi(b []byte) int64 {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

// event applies one report. Reports:
//
//	T g lim key inc    goroutine g is about to hit
//	A g end...         its hit was allowed (one end per tier)
//	D g                its hit was denied
//	B n clock          explicit snapshot n is about to begin
//	C n                snapshot n committed
//	O                  the DB is open and SIGTERM is handled
//	X                  the DB was closed gracefully
//	F msg              fatal error in the child
func (p *parent) event(f [][]byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bad report: %v", r)
		}
	}()
	switch f[0][0] {
	case 'T':
		g := int(atoi(f[1]))
		p.pending[g] = pendingHit{lim: int(atoi(f[2])), key: int(atoi(f[3])), inc: atoi(f[4])}
	case 'A':
		g := int(atoi(f[1]))
		h, ok := p.pending[g]
		if !ok {
			return errors.New("decision without a hit")
		}
		delete(p.pending, g)
		p.sum.Allowed++
		if len(f)-2 != len(scales[h.lim]) {
			return errors.New("wrong number of tiers")
		}
		for tier := range scales[h.lim] {
			end := atoi(f[2+tier])
			lk := lkey{lim: h.lim, tier: tier, key: h.key}
			w := wkey{lk, end}
			if old := p.latest[lk]; end > old {
				if old != 0 {
					p.sum.Rollovers++
				}
				p.latest[lk] = end
			}
			p.expected[w] += h.inc
			p.total[w] += h.inc
			if lim := limits[h.lim][tier]; p.expected[w] > lim {
				p.failf("over the limit: window %+v holds %d, limit %d", w, p.expected[w], lim)
			}
		}
	case 'D':
		g := int(atoi(f[1]))
		if _, ok := p.pending[g]; !ok {
			return errors.New("decision without a hit")
		}
		delete(p.pending, g)
		p.sum.Denied++
	case 'B':
		n := atoi(f[1])
		p.clock = max(p.clock, atoi(f[2]))
		st := make(map[lkey]winState, len(p.latest))
		for lk, end := range p.latest {
			st[lk] = winState{end: end, count: p.expected[wkey{lk, end}]}
		}
		p.saved[n] = st
	case 'C':
		n := atoi(f[1])
		st, ok := p.saved[n]
		if !ok {
			return errors.New("commit without a beginning")
		}
		p.commit = st
		for m := range p.saved {
			if m <= n {
				delete(p.saved, m)
			}
		}
		p.sum.Commits++
	case 'O':
		close(p.opened)
	case 'X':
		p.closed = true
	case 'F':
		return errors.New("child reported a fatal error")
	default:
		return errors.New("unknown report")
	}
	return nil
}

// verify checks the file after the child has died and resets the parent's
// belief to what the file holds.
func (p *parent) verify(path string, graceful bool) error {
	clear(p.saved)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && p.sum.Allowed == 0 {
		return nil // killed before it created the file
	}
	disk, err := readFile(path)
	if err != nil {
		return err
	}
	if graceful && len(p.pending) > 0 {
		p.failf("graceful stop with %d hits in flight", len(p.pending))
	}
	pendingInc := func(lim, key int) int64 {
		var n int64
		for _, h := range p.pending {
			if h.lim == lim && h.key == key {
				n += h.inc
			}
		}
		return n
	}
	p.sum.Pending += int64(len(p.pending))
	pendingSeen := map[int]bool{}
	var lostNow int64
	for lim := 0; lim < numLims; lim++ {
		for key := 0; key < numKeys; key++ {
			cs := disk[string(recordKey(lim, keyName(key)))]
			for tier := range scales[lim] {
				p.sum.WindowsChecked++
				lk := lkey{lim: lim, tier: tier, key: key}
				var have winState
				if cs != nil {
					have = winState{end: cs[tier].End, count: cs[tier].Count}
				}
				w := wkey{lk, have.end}
				exp := p.expected[w]
				slack := pendingInc(lim, key)
				// No phantom counts.
				if have.count > exp+slack {
					p.failf("phantom: %+v: file holds %d, allowed %d (+%d in flight)", w, have.count, exp, slack)
				}
				if have.count > exp {
					for g, h := range p.pending {
						if h.lim == lim && h.key == key {
							pendingSeen[g] = true
						}
					}
				}
				// Bounded loss.
				if c := p.commit[lk]; c.count > 0 {
					switch {
					case have.end == c.end && have.count < c.count:
						p.failf("lost committed counts: %+v: file holds %d, %d committed", w, have.count, c.count)
					case have.end < c.end:
						p.failf("lost a committed window: %+v: file holds window ending %d (%d), committed window ends %d (%d)",
							lk, have.end, have.count, c.end, c.count)
					}
				}
				// A graceful stop loses nothing.
				if graceful {
					if latest := p.latest[lk]; latest != 0 && p.expected[wkey{lk, latest}] > 0 &&
						(have.end != latest || have.count != p.expected[wkey{lk, latest}]) {
						p.failf("graceful stop lost counts: %+v: file holds %+v, allowed %d in window ending %d",
							lk, have, p.expected[wkey{lk, latest}], latest)
					}
				}
				// The restarted DB starts from the file: move the belief there.
				for ww, n := range p.expected {
					if ww.lkey != lk {
						continue
					}
					// Windows older than the file's were superseded (they
					// had ended), not lost.
					keep := int64(0)
					switch {
					case ww.end < have.end:
						keep = n
					case ww.end == have.end:
						keep = min(n, have.count)
					}
					if n > keep {
						p.lost[ww] += n - keep
						lostNow += n - keep
					}
					delete(p.expected, ww)
				}
				if have.end != 0 {
					p.expected[w] = have.count
					if have.end > p.latest[lk] {
						p.latest[lk] = have.end
					}
				} else {
					delete(p.latest, lk)
				}
			}
		}
	}
	p.sum.PendingPersisted += int64(len(pendingSeen))
	p.sum.Lost += lostNow
	p.sum.MaxLostAtCrash = max(p.sum.MaxLostAtCrash, lostNow)
	clear(p.commit)
	for lk, end := range p.latest {
		p.commit[lk] = winState{end: end, count: p.expected[wkey{lk, end}]}
	}
	clear(p.pending)

	// The file reopens through ratedb too.
	clock := p.clock
	db, err := ratedb.Open(path, &ratedb.Options{
		Clock:          func() time.Time { return time.UnixMilli(clock) },
		SnapshotPeriod: -1, CleanPeriod: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return fmt.Errorf("reopening the file with ratedb: %w", err)
	}
	if err := db.Verify(); err != nil {
		_ = db.Close()
		return fmt.Errorf("a crashed file must verify: %w", err)
	}
	return db.Close()
}

// readFile opens the file read-only with bbolt, runs bbolt's consistency
// check, and returns every window decoded.
func readFile(path string) (map[string][]record.Counter, error) {
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("bbolt open: %w", err)
	}
	defer bdb.Close()
	out := map[string][]record.Counter{}
	err = bdb.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("bbolt consistency check: %w", errors.Join(errs...))
		}
		if f := tx.Bucket(layout.BucketMeta).Get(layout.KeyFormat); string(f) != string(layout.Format) {
			return fmt.Errorf("format %q, want %q", f, layout.Format)
		}
		return layout.ForEach(tx, layout.Visitor{
			Window: func(k []byte, cs []record.Counter) error {
				if _, dup := out[string(k)]; dup {
					return errors.New("a window is in the file twice")
				}
				out[string(k)] = slices.Clone(cs)
				return nil
			},
			Damaged: func(err error) error { return fmt.Errorf("a block fails to decode: %w", err) },
		})
	})
	return out, err
}

// ChildMain is the child: it hits keys until it is killed or told to stop.
func ChildMain() {
	path := os.Getenv(envPath)
	base, _ := strconv.ParseInt(os.Getenv(envBase), 10, 64)
	seed, _ := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	events := os.NewFile(3, "events")
	var wmu sync.Mutex // keeps each report one write
	report := func(b []byte) {
		wmu.Lock()
		_, err := events.Write(b)
		wmu.Unlock()
		if err != nil {
			os.Exit(4)
		}
	}
	fatal := func(msg string, err error) {
		report([]byte("F " + msg + "\n"))
		fmt.Fprintln(os.Stderr, msg+":", err)
		os.Exit(3)
	}

	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)

	started := time.Now()
	clock := func() time.Time {
		return time.UnixMilli(base + time.Since(started).Milliseconds()*speed)
	}
	db, err := ratedb.Open(path, &ratedb.Options{
		Clock:          clock,
		SnapshotPeriod: 10 * time.Millisecond,
		CleanPeriod:    -1,
		MaxHotKeys:     4,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		fatal("open", err)
	}
	fixed, err := db.Window(ratedb.FixedWindow, time.Duration(scales[limFixed][0])*time.Millisecond)
	if err != nil {
		fatal("window", err)
	}
	perKey, err := db.Window(ratedb.PerKeyWindow, time.Duration(scales[limPerKey][0])*time.Millisecond)
	if err != nil {
		fatal("window", err)
	}
	var tiers []ratedb.Tier
	for i, sc := range scales[limLayered] {
		tiers = append(tiers, ratedb.Tier{Scale: time.Duration(sc) * time.Millisecond, Limit: limits[limLayered][i]})
	}
	layered, err := db.Layered(ratedb.FixedWindow, tiers...)
	if err != nil {
		fatal("layered", err)
	}

	report([]byte("O\n"))
	var stop atomic.Bool
	var wg sync.WaitGroup
	ctx := context.Background()
	const hitters = 2
	for g := 0; g < hitters; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			buf := make([]byte, 0, 128)
			for !stop.Load() {
				lim, key, inc := rng.IntN(numLims), rng.IntN(numKeys), 1+rng.Int64N(2)
				k := keyName(key)
				buf = fmt.Appendf(buf[:0], "T %d %d %d %d\n", g, lim, key, inc)
				report(buf)
				var r ratedb.Result
				var err error
				switch lim {
				case limFixed:
					r, err = fixed.Hit(ctx, k, limits[lim][0], inc)
				case limPerKey:
					r, err = perKey.Hit(ctx, k, limits[lim][0], inc)
				default:
					r, err = layered.Hit(ctx, k, inc)
				}
				if err != nil {
					fatal("hit", err)
				}
				if !r.Allowed {
					report(fmt.Appendf(buf[:0], "D %d\n", g))
					continue
				}
				buf = fmt.Appendf(buf[:0], "A %d", g)
				if lim == limLayered {
					for _, tr := range r.Tiers {
						buf = fmt.Appendf(buf, " %d", tr.ResetAt.UnixMilli())
					}
				} else {
					buf = fmt.Appendf(buf, " %d", r.ResetAt.UnixMilli())
				}
				report(append(buf, '\n'))
			}
		}(g)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 99))
		for n := 1; !stop.Load(); n++ {
			report(fmt.Appendf(nil, "B %d %d\n", n, clock().UnixMilli()))
			if err := db.Snapshot(); err != nil {
				fatal("snapshot", err)
			}
			report(fmt.Appendf(nil, "C %d\n", n))
			time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
		}
	}()

	<-term
	stop.Store(true)
	wg.Wait()
	if err := db.Close(); err != nil {
		fatal("close", err)
	}
	report([]byte("X\n"))
	os.Exit(0)
}
