// Package corrupt damages ratedb database files in every way we could think
// of (truncations, flipped bytes in meta pages, data pages and records,
// overwritten pages, garbage and foreign files) and checks that ratedb
// handles each one without crashing: Open either succeeds, with damaged
// records skipped and counted in Stats.CorruptSkipped, or returns an error
// wrapping ErrCorrupt (or, with OnCorrupt: CorruptMoveAside, moves the file
// aside and starts empty). A zero-byte or foreign file is never silently
// treated as an empty database. After a successful Open every key is read
// and a Hit, a Snapshot, a Clean and a Close run; each must succeed or
// return ErrCorrupt, and no read may return a count the file never held. If
// the page audit after Open rebuilt the file, the rebuilt file must reopen
// and pass Verify.
//
// bbolt can panic or fault on damaged files, so trials run in batches in
// child processes (see Run): a crash is seen, reported with its trial
// number, and counted as a failure.
package corrupt

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ratedb/ratedb"
	bolt "go.etcd.io/bbolt"
)

// Clock of the base file: every window is open at trialNow.
var (
	buildNow = time.UnixMilli(1_767_225_600_000 + 1_000)
	trialNow = buildNow.Add(time.Minute)
)

// limiter is one limiter of the base file.
type limiter struct {
	alg     ratedb.Algorithm
	scale   time.Duration
	layered bool
}

var limiters = []limiter{
	{ratedb.FixedWindow, time.Hour, false},
	{ratedb.PerKeyWindow, 2 * time.Hour, false},
	{ratedb.StaggeredWindow, 3 * time.Hour, false},
	{ratedb.FixedWindow, 0, true}, // tiers 1h and 1d
}

var layeredTiers = []ratedb.Tier{{Scale: time.Hour, Limit: 1 << 40}, {Scale: 24 * time.Hour, Limit: 1 << 40}}

const numKeys = 300

func keyName(i int) string { return fmt.Sprintf("user-%04d", i) }

// count is the count of key i under limiter l in the base file.
func count(l, i int) int64 { return int64(1 + (i*7+l*13)%50) }

// handles are the limiters of an open DB.
type handles struct {
	ws []*ratedb.Window
	ly *ratedb.Layered
}

func open(db *ratedb.DB) (handles, error) {
	var h handles
	for _, l := range limiters {
		if l.layered {
			ly, err := db.Layered(ratedb.FixedWindow, layeredTiers...)
			if err != nil {
				return h, err
			}
			h.ly = ly
			h.ws = append(h.ws, nil)
			continue
		}
		w, err := db.Window(l.alg, l.scale)
		if err != nil {
			return h, err
		}
		h.ws = append(h.ws, w)
	}
	return h, nil
}

func (h handles) get(ctx context.Context, l int, key string) (int64, error) {
	if limiters[l].layered {
		cs, err := h.ly.Get(ctx, key)
		if err != nil || len(cs) == 0 {
			return 0, err
		}
		return cs[0], nil
	}
	return h.ws[l].Get(ctx, key)
}

// BuildBase writes the base database and a foreign bbolt file into dir and
// returns their paths.
func BuildBase(dir string) (base, foreign string, err error) {
	base = filepath.Join(dir, "base.db")
	ctx := context.Background()
	opts := &ratedb.Options{
		Clock:          func() time.Time { return buildNow },
		SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 64,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	db, err := ratedb.Open(base, opts)
	if err != nil {
		return "", "", err
	}
	h, err := open(db)
	if err != nil {
		return "", "", err
	}
	for i := 0; i < numKeys; i++ {
		k := keyName(i)
		for l := range limiters {
			if limiters[l].layered {
				if _, err := h.ly.Hit(ctx, k, count(l, i)); err != nil {
					return "", "", err
				}
			} else if _, err := h.ws[l].Inc(ctx, k, count(l, i)); err != nil {
				return "", "", err
			}
		}
		if i%50 == 49 { // several commits: meta pages with different txids, freed pages
			if err := db.Snapshot(); err != nil {
				return "", "", err
			}
		}
	}
	if err := db.Close(); err != nil {
		return "", "", err
	}

	foreign = filepath.Join(dir, "foreign.db")
	bdb, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		return "", "", err
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("users"))
		if err != nil {
			return err
		}
		for i := 0; i < 500; i++ {
			if err := b.Put([]byte(keyName(i)), bytes.Repeat([]byte{byte(i)}, 40)); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := bdb.Close(); err == nil {
		err = cerr
	}
	return base, foreign, err
}

// Mutation kinds.
var kinds = []string{
	"truncate-zero", "truncate-few", "truncate-half", "truncate-one-page", "truncate-minus-page",
	"truncate-random", "flip-meta0", "flip-meta1", "flip-both-metas", "flip-data-page", "flip-record",
	"flip-random", "garbage-page", "zero-page", "garbage-file", "foreign-bbolt", "text-file",
}

// mustFail lists the kinds that leave no valid ratedb database: Open must
// never succeed on them with the file in place.
var mustFail = map[string]bool{
	"truncate-zero": true, "truncate-few": true, "garbage-file": true, "foreign-bbolt": true, "text-file": true,
}

const pageSize = 4096

// TrimSlack drops the all-zero pages at the end of a database file: bbolt
// extends the file past its data (sparse, never written), and damage there
// would test nothing. What is left is still a valid database.
func TrimSlack(data []byte) []byte {
	for len(data) > 4*pageSize && allZero(data[len(data)-pageSize:]) {
		data = data[:len(data)-pageSize]
	}
	return data
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// mutate damages data (a copy of the base file) and returns the result.
func mutate(rng *rand.Rand, kind string, data, foreign []byte) []byte {
	flip := func(lo, hi, n int) {
		if hi > len(data) {
			hi = len(data)
		}
		if hi <= lo {
			return
		}
		for i := 0; i < n; i++ {
			off := lo + rng.IntN(hi-lo)
			data[off] ^= byte(1 + rng.IntN(255))
		}
	}
	pages := len(data) / pageSize
	switch kind {
	case "truncate-zero":
		return data[:0]
	case "truncate-few":
		return data[:1+rng.IntN(64)]
	case "truncate-half":
		return data[:len(data)/2]
	case "truncate-one-page":
		return data[:pageSize*(1+rng.IntN(2))]
	case "truncate-minus-page":
		return data[:len(data)-pageSize*(1+rng.IntN(2))]
	case "truncate-random":
		return data[:rng.IntN(len(data))]
	case "flip-meta0":
		flip(0, 16+64, 1+rng.IntN(3))
	case "flip-meta1":
		flip(pageSize, pageSize+16+64, 1+rng.IntN(3))
	case "flip-both-metas":
		flip(0, 16+64, 1+rng.IntN(3))
		flip(pageSize, pageSize+16+64, 1+rng.IntN(3))
	case "flip-data-page":
		p := 2 + rng.IntN(pages-2)
		flip(p*pageSize, (p+1)*pageSize, 1+rng.IntN(8))
	case "flip-record":
		// A byte of one record's key or value, found by its key.
		k := []byte(keyName(rng.IntN(numKeys)))
		var offs []int
		for off := 0; ; {
			i := bytes.Index(data[off:], k)
			if i < 0 {
				break
			}
			offs = append(offs, off+i)
			off += i + 1
		}
		if len(offs) == 0 {
			flip(2*pageSize, len(data), 1)
			break
		}
		at := offs[rng.IntN(len(offs))]
		flip(at-20, at+len(k)+40, 1+rng.IntN(2))
	case "flip-random":
		flip(0, len(data), 1+rng.IntN(16))
	case "garbage-page":
		p := rng.IntN(pages)
		for i := p * pageSize; i < (p+1)*pageSize; i++ {
			data[i] = byte(rng.Uint32())
		}
	case "zero-page":
		p := rng.IntN(pages)
		clear(data[p*pageSize : (p+1)*pageSize])
	case "garbage-file":
		g := make([]byte, 1+rng.IntN(64*1024))
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		return g
	case "foreign-bbolt":
		return append([]byte(nil), foreign...)
	case "text-file":
		return []byte("this is not a database\n")
	}
	return data
}

// Outcome of one trial.
type Outcome struct {
	Trial      int
	Kind       string
	MoveAside  bool
	Result     string // "opened", "corrupt", "moved-aside"
	Skipped    int64  // Stats.CorruptSkipped after reading every key
	Missing    int    // keys read as 0 that the base file holds
	OpsCorrupt int    // operations after Open that returned ErrCorrupt
	Rebuilt    bool   // opened, then the page audit found damage and the file was rebuilt
	Fail       string // non-empty: a violation
}

// Trial runs trial number n with the given seed in dir.
func Trial(dir, base, foreign string, seed uint64, n int) Outcome {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	kind := kinds[rng.IntN(len(kinds))]
	out := Outcome{Trial: n, Kind: kind, MoveAside: rng.IntN(10) < 3}
	failf := func(format string, args ...any) Outcome {
		out.Fail = fmt.Sprintf(format, args...)
		return out
	}
	data, err := os.ReadFile(base)
	if err != nil {
		return failf("%v", err)
	}
	data = TrimSlack(data)
	fdata, err := os.ReadFile(foreign)
	if err != nil {
		return failf("%v", err)
	}
	tdir := filepath.Join(dir, "t"+strconv.Itoa(n))
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		return failf("%v", err)
	}
	defer os.RemoveAll(tdir)
	path := filepath.Join(tdir, "rate.db")
	if err := os.WriteFile(path, mutate(rng, kind, data, fdata), 0o600); err != nil {
		return failf("%v", err)
	}
	policy := ratedb.CorruptFail
	if out.MoveAside {
		policy = ratedb.CorruptMoveAside
	}
	opts := &ratedb.Options{
		Clock:          func() time.Time { return trialNow },
		SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 16,
		OpenTimeout: time.Second, OnCorrupt: policy, NoSync: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	db, err := ratedb.Open(path, opts)
	if err != nil {
		if !errors.Is(err, ratedb.ErrCorrupt) {
			return failf("Open: an error that does not wrap ErrCorrupt: %v", err)
		}
		if out.MoveAside {
			return failf("Open with CorruptMoveAside returned %v", err)
		}
		out.Result = "corrupt"
		return out
	}
	defer db.Close()
	aside, _ := filepath.Glob(path + ".corrupt-*")
	out.Result = "opened"
	if len(aside) > 0 {
		if !out.MoveAside {
			return failf("the file was moved aside under CorruptFail")
		}
		out.Result = "moved-aside"
	} else if mustFail[kind] {
		return failf("a %s file opened as a database", kind)
	}
	ctx := context.Background()
	h, err := open(db)
	if err != nil {
		return failf("limiters: %v", err)
	}
	isCorrupt := func(what string, err error) string {
		if err == nil {
			return ""
		}
		if errors.Is(err, ratedb.ErrCorrupt) {
			out.OpsCorrupt++
			return ""
		}
		return fmt.Sprintf("%s: an error that does not wrap ErrCorrupt: %v", what, err)
	}
	for i := 0; i < numKeys; i++ {
		k := keyName(i)
		for l := range limiters {
			got, err := h.get(ctx, l, k)
			if msg := isCorrupt("Get", err); msg != "" {
				return failf("%s", msg)
			}
			if err != nil {
				continue
			}
			want := count(l, i)
			switch {
			case out.Result == "moved-aside" && got != 0:
				return failf("moved aside, yet key %d of limiter %d reads %d", i, l, got)
			case got != 0 && got != want:
				return failf("phantom: key %d of limiter %d reads %d, the file held %d", i, l, got, want)
			case got == 0 && out.Result == "opened":
				out.Missing++
			}
		}
	}
	out.Skipped = db.Stats().CorruptSkipped
	// The full check finds what reads cannot: records made unreachable.
	if msg := isCorrupt("Verify", db.Verify()); msg != "" {
		return failf("%s", msg)
	}
	for i := 0; i < 20; i++ {
		k := keyName(rng.IntN(numKeys + 20))
		_, err := h.ws[0].Hit(ctx, k, 1<<40, 1)
		if msg := isCorrupt("Hit", err); msg != "" {
			return failf("%s", msg)
		}
		_, err = h.ly.Hit(ctx, k, 1)
		if msg := isCorrupt("Layered.Hit", err); msg != "" {
			return failf("%s", msg)
		}
	}
	if msg := isCorrupt("Snapshot", db.Snapshot()); msg != "" {
		return failf("%s", msg)
	}
	_, err = db.Clean()
	if msg := isCorrupt("Clean", err); msg != "" {
		return failf("%s", msg)
	}
	if msg := isCorrupt("Close", db.Close()); msg != "" {
		return failf("%s", msg)
	}
	// A file the page audit rebuilt is ratedb's own work: it must reopen
	// and pass Verify.
	if out.Result == "opened" {
		if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) > 0 {
			out.Rebuilt = true
			db, err := ratedb.Open(path, opts)
			if err != nil {
				return failf("reopening the rebuilt file: %v", err)
			}
			verr := db.Verify()
			cerr := db.Close()
			if verr != nil || cerr != nil {
				return failf("the rebuilt file: Verify %v, Close %v", verr, cerr)
			}
		}
	}
	return out
}

// ChildMain runs trials [first, last) and prints one line per trial:
// "S n" when it starts and "R <outcome>" when it ends. Environment:
// RATEDB_CORRUPT_CHILD=dir, RATEDB_CORRUPT_ARGS="base foreign seed first last".
func ChildMain() {
	dir := os.Getenv(EnvChild)
	f := strings.Fields(os.Getenv(envArgs))
	if len(f) != 5 {
		fmt.Fprintln(os.Stderr, "bad arguments")
		os.Exit(2)
	}
	seed, _ := strconv.ParseUint(f[2], 10, 64)
	first, _ := strconv.Atoi(f[3])
	last, _ := strconv.Atoi(f[4])
	w := bufio.NewWriter(os.Stdout)
	for n := first; n < last; n++ {
		fmt.Fprintf(w, "S %d\n", n)
		w.Flush()
		o := Trial(dir, f[0], f[1], seed, n)
		fmt.Fprintf(w, "R %d %s %t %s %d %d %d %t %q\n", o.Trial, o.Kind, o.MoveAside, o.Result, o.Skipped, o.Missing, o.OpsCorrupt, o.Rebuilt, o.Fail)
		w.Flush()
	}
	os.Exit(0)
}

// Environment of a child.
const (
	EnvChild = "RATEDB_CORRUPT_CHILD"
	envArgs  = "RATEDB_CORRUPT_ARGS"
)

// Summary aggregates a run.
type Summary struct {
	Trials, Crashes, Hangs, Failures int
	ByResult                         map[string]int
	ByKind                           map[string]map[string]int
	OpenedWithSkips                  int            // opened and Stats.CorruptSkipped > 0
	Rebuilt                          int            // opened, then rebuilt after the page audit
	OpenedMissing                    int            // opened and some key read 0 (skipped, unreachable or rolled back)
	SilentLoss                       map[string]int // by kind: opened, some key read 0, nothing skipped or reported
	OpsCorrupt                       int            // operations after Open returning ErrCorrupt
	FailLines                        []string
	Elapsed                          time.Duration
}

func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "corrupt: %d trials in %v: %d crashes, %d hangs, %d failures; results %v; "+
		"%d opened with skipped records, %d rebuilt after the page audit, %d opened with keys reading 0, %d later operations returned ErrCorrupt\n",
		s.Trials, s.Elapsed.Round(time.Millisecond), s.Crashes, s.Hangs, s.Failures, s.ByResult,
		s.OpenedWithSkips, s.Rebuilt, s.OpenedMissing, s.OpsCorrupt)
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %-20s %v silent-loss:%d\n", k, s.ByKind[k], s.SilentLoss[k])
	}
	for _, l := range s.FailLines {
		fmt.Fprintf(&b, "  FAIL %s\n", l)
	}
	return b.String()
}

// Run runs trials in child processes (argv child), batch trials each, with
// the given seed, in dir.
func Run(child []string, dir string, seed uint64, trials, batch int) (Summary, error) {
	start := time.Now()
	s := Summary{ByResult: map[string]int{}, ByKind: map[string]map[string]int{}, SilentLoss: map[string]int{}}
	base, foreign, err := BuildBase(dir)
	if err != nil {
		return s, fmt.Errorf("building the base file: %w", err)
	}
	for first := 0; first < trials; {
		last := min(first+batch, trials)
		next, err := runBatch(child, dir, base, foreign, seed, first, last, &s)
		if err != nil {
			return s, err
		}
		first = next
	}
	s.Elapsed = time.Since(start)
	return s, nil
}

// runBatch runs trials [first, last) in one child and returns the trial to
// continue from: last, or the one after a trial that crashed or hung.
func runBatch(child []string, dir, base, foreign string, seed uint64, first, last int, s *Summary) (int, error) {
	cmd := exec.Command(child[0], child[1:]...)
	cmd.Env = append(os.Environ(), EnvChild+"="+dir,
		fmt.Sprintf("%s=%s %s %d %d %d", envArgs, base, foreign, seed, first, last))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	hung := false
	t := time.AfterFunc(2*time.Minute, func() { hung = true; _ = cmd.Process.Kill() })
	werr := cmd.Wait()
	t.Stop()
	started := -1
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "S "):
			started, _ = strconv.Atoi(line[2:])
		case strings.HasPrefix(line, "R "):
			var o Outcome
			var fail string
			_, err := fmt.Sscanf(line, "R %d %s %t %s %d %d %d %t %q", &o.Trial, &o.Kind, &o.MoveAside, &o.Result, &o.Skipped, &o.Missing, &o.OpsCorrupt, &o.Rebuilt, &fail)
			if err != nil {
				return 0, fmt.Errorf("bad report %q: %w", line, err)
			}
			s.Trials++
			started = -1
			if s.ByKind[o.Kind] == nil {
				s.ByKind[o.Kind] = map[string]int{}
			}
			if fail != "" {
				s.Failures++
				s.ByKind[o.Kind]["FAIL"]++
				s.FailLines = append(s.FailLines, fmt.Sprintf("trial %d (%s, move-aside %t): %s", o.Trial, o.Kind, o.MoveAside, fail))
				continue
			}
			s.ByResult[o.Result]++
			s.ByKind[o.Kind][o.Result]++
			if o.Result == "opened" && o.Skipped > 0 {
				s.OpenedWithSkips++
			}
			if o.Rebuilt {
				s.Rebuilt++
			}
			if o.Result == "opened" && o.Missing > 0 {
				s.OpenedMissing++
				if o.Skipped == 0 && o.OpsCorrupt == 0 {
					s.SilentLoss[o.Kind]++
				}
			}
			s.OpsCorrupt += o.OpsCorrupt
		}
	}
	if started >= 0 || werr != nil {
		what := "crashed"
		if hung {
			what = "hung"
			s.Hangs++
		} else {
			s.Crashes++
		}
		s.Trials++
		tail := stderr.String()
		if len(tail) > 2000 {
			tail = tail[:2000]
		}
		s.FailLines = append(s.FailLines, fmt.Sprintf("trial %d %s (%v): %s", started, what, werr, tail))
		if started < 0 {
			return last, nil
		}
		return started + 1, nil
	}
	return last, nil
}
