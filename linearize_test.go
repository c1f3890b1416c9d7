package ratedb_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/ratedb/ratedb"
)

// TestLinearizable records concurrent histories of Hit, Inc, Set, Get,
// ExpiresAt, Refund, Undo and Reset on one key and on a few keys, for FixedWindow,
// PerKeyWindow and StaggeredWindow, and checks with porcupine that each one
// is linearizable against the sequential model. While the history runs,
// other goroutines hit many other keys (with MaxHotKeys tiny, so the keys
// under test are constantly evicted, written out and reloaded) and run
// Snapshot and Clean. The clock is fixed within a phase; between phases, a
// dedicated Advance operation (which every other operation either precedes
// or follows) moves it, so windows roll over within a history.
//
//	go test -run TestLinearizable -linearize.histories=2000
var linHistories = flag.Int("linearize.histories", 200, "histories TestLinearizable checks")

type linOp uint8

const (
	linHit linOp = iota
	linInc
	linSet
	linGet
	linExpires
	linReset
	linRefund
	linUndo
	linAdvance
)

type linIn struct {
	op           linOp
	key          string
	limit, n, at int64 // at: new clock for linAdvance, the undone hit's window end for linUndo
}

type linOut struct {
	allowed    bool
	count, end int64
}

// linState is the model of one key: the clock and the key's window.
type linState struct{ now, count, end int64 }

func linModel(alg ratedb.Algorithm, scale int64) porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			// One partition per key; every Advance belongs to all of them.
			var adv []porcupine.Operation
			byKey := map[string][]porcupine.Operation{}
			for _, o := range h {
				in := o.Input.(linIn)
				if in.op == linAdvance {
					adv = append(adv, o)
				} else {
					byKey[in.key] = append(byKey[in.key], o)
				}
			}
			var out [][]porcupine.Operation
			for _, ops := range byKey {
				out = append(out, append(append([]porcupine.Operation(nil), adv...), ops...))
			}
			return out
		},
		Init: func() any { return linState{} }, // now is set by the first Advance
		Step: func(st, input, output any) (bool, any) {
			s, in, out := st.(linState), input.(linIn), output.(linOut)
			if in.op == linAdvance {
				s.now = max(s.now, in.at)
				return true, s
			}
			count, end := int64(0), mNextEnd(alg, in.key, s.now, scale)
			if s.now < s.end {
				count, end = s.count, s.end
			}
			switch in.op {
			case linHit:
				allowed := count+in.n <= in.limit
				if allowed {
					count += in.n
					s.count, s.end = count, end
				}
				return out == linOut{allowed: allowed, count: count, end: end}, s
			case linInc:
				s.count, s.end = count+in.n, end
				return out.count == s.count, s
			case linSet:
				if alg == ratedb.PerKeyWindow {
					end = s.now + scale
				}
				s.count, s.end = in.n, end
				return out.count == in.n, s
			case linGet:
				if s.now >= s.end {
					return out.count == 0, s
				}
				return out.count == s.count, s
			case linExpires:
				if s.now >= s.end {
					return out.end == 0, s
				}
				return out.end == s.end, s
			case linRefund:
				if s.now >= s.end {
					return out == linOut{}, s // no window: nothing given back
				}
				s.count = max(0, s.count-in.n)
				return out == linOut{count: s.count, end: s.end}, s
			case linUndo:
				if s.now < s.end && s.end == in.at {
					s.count = max(0, s.count-in.n)
				}
				return true, s
			case linReset:
				s.count, s.end = 0, 0
				return true, s
			}
			return false, s
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(linIn), output.(linOut)
			return fmt.Sprintf("%d(%s,%d,%d,%d) -> %+v", in.op, in.key, in.limit, in.n, in.at, out)
		},
	}
}

func TestLinearizable(t *testing.T) {
	n := *linHistories
	algs := []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow}
	for i := 0; i < n; i++ {
		seed := uint64(i)
		alg := algs[i%len(algs)]
		keys := 1 + 2*(i/len(algs)%2) // one key, then three
		if !linHistory(t, seed, alg, keys) {
			return
		}
	}
}

// linHistory records and checks one history; it reports whether it passed.
func linHistory(t *testing.T, seed uint64, alg ratedb.Algorithm, nkeys int) bool {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	const scale = 100 // ms
	clock := &mClock{}
	clock.set(1_767_225_600_000 + rng.Int64N(1000))
	db, err := ratedb.Open(filepath.Join(t.TempDir(), "lin.db"), &ratedb.Options{
		Clock: clock.Now, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 2, NoSync: true, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := db.Window(alg, scale*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("lin-%d", i)
	}

	// Churn: other keys, snapshots and janitor passes, not recorded.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(2)
	go func() {
		defer bg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = w.Hit(ctx, fmt.Sprintf("churn-%d", i%64), 5, 1)
		}
	}()
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = db.Snapshot()
			_, _ = db.Clean()
		}
	}()

	start := time.Now()
	stamp := func() int64 { return int64(time.Since(start)) }
	var (
		mu   sync.Mutex
		hist []porcupine.Operation
		bad  atomic.Value
	)
	record := func(client int, in linIn, call int64, out linOut) {
		ret := stamp()
		mu.Lock()
		hist = append(hist, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
		mu.Unlock()
	}
	advance := func(at int64) {
		call := stamp()
		clock.set(at)
		record(0, linIn{op: linAdvance, at: at}, call, linOut{})
	}
	advance(clock.get())
	const clients, phases, opsPerPhase = 4, 3, 6
	// Each client's last allowed Hit on each key, kept across phases so
	// that an Undo may come after its window has ended.
	clientHits := make([]map[string]mHit, clients+1)
	for c := range clientHits {
		clientHits[c] = map[string]mHit{}
	}
	for phase := 0; phase < phases; phase++ {
		var wg sync.WaitGroup
		for c := 1; c <= clients; c++ {
			crng := rand.New(rand.NewPCG(seed, uint64(phase*100+c)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				hits := clientHits[c]
				for j := 0; j < opsPerPhase; j++ {
					in := linIn{key: keys[crng.IntN(len(keys))]}
					var out linOut
					call := stamp()
					var err error
					r := crng.IntN(24)
					last, ok := hits[in.key]
					if r >= 22 && !ok {
						r = 14 // nothing to undo: a Get
					}
					switch {
					case r < 10:
						in.op, in.limit, in.n = linHit, 2+crng.Int64N(6), 1+crng.Int64N(2)
						if r == 0 {
							in.limit = 0 // denied outright: answered from a read if the key has no window
						}
						var res ratedb.Result
						res, err = w.Hit(ctx, in.key, in.limit, in.n)
						out = linOut{allowed: res.Allowed, count: res.Count, end: res.ResetAt.UnixMilli()}
						if res.Allowed {
							hits[in.key] = mHit{res, in.n}
						}
					case r < 12:
						in.op, in.n = linInc, 1+crng.Int64N(2)
						out.count, err = w.Inc(ctx, in.key, in.n)
					case r < 13:
						in.op, in.n = linSet, crng.Int64N(4)
						out.count, err = w.Set(ctx, in.key, in.n)
					case r < 16:
						in.op = linGet
						out.count, err = w.Get(ctx, in.key)
					case r < 18:
						in.op = linExpires
						var end time.Time
						end, err = w.ExpiresAt(ctx, in.key)
						out.end = msOrZero(end)
					case r < 20:
						in.op = linReset
						err = w.Reset(ctx, in.key)
					case r < 22:
						in.op, in.n = linRefund, 1+crng.Int64N(2)
						var end time.Time
						out.count, end, err = w.Refund(ctx, in.key, in.n)
						out.end = msOrZero(end)
					default:
						in.op, in.n, in.at = linUndo, last.inc, last.r.ResetAt.UnixMilli()
						err = w.Undo(ctx, in.key, last.r, in.n)
						delete(hits, in.key)
					}
					if err != nil {
						bad.Store(err)
						return
					}
					record(c, in, call, out)
				}
			}()
		}
		wg.Wait()
		advance(clock.get() + rng.Int64N(2*scale))
	}
	close(stop)
	bg.Wait()
	if err, _ := bad.Load().(error); err != nil {
		t.Errorf("history %d: %v", seed, err)
		return false
	}
	res, info := porcupine.CheckOperationsVerbose(linModel(alg, scale), hist, 10*time.Second)
	if res != porcupine.Ok {
		file := filepath.Join(t.TempDir(), "history.html")
		_ = porcupine.VisualizePath(linModel(alg, scale), info, file)
		t.Errorf("history %d (%v, %d keys): %s (%d operations; visualization written to %s)", seed, alg, nkeys, res, len(hist), file)
		for _, o := range hist {
			t.Logf("client %d [%d,%d] %s", o.ClientId, o.Call, o.Return, linModel(alg, scale).DescribeOperation(o.Input, o.Output))
		}
		return false
	}
	return true
}
