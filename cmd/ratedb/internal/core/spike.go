package core

import (
	"hash/maphash"
	"sync"
	"time"
)

// A boundary spike is a key that exhausts a window (a hit leaves it no room
// or is denied) within the first 10% of the window's scale, having exhausted
// the window before it, which ended at most 10% of the scale before this one
// began (for FixedWindow and StaggeredWindow: exactly when it began). It is
// counted at most once per window. For a layered limit the binding tier's
// window is used.
//
// The table remembers, per key, the end of the last window the key
// exhausted. It is a fixed table of spikeSlots slots indexed by a hash of the
// counters and key: a key whose slot another key took since is not counted,
// so the figure is a lower bound under heavy key churn.
const spikeSlots = 1 << 16

type spikeSlot struct {
	mu   sync.Mutex
	h    uint64
	end  int64 // Unix ms of the end of the last window the key exhausted
	seen bool
}

type spikeTable struct {
	once  sync.Once
	seed  maphash.Seed
	slots []spikeSlot
}

// exhausted records that the key with hash input (counter, key) exhausted
// its window [end-scale, end) at now, and reports whether that is a boundary
// spike.
func (t *spikeTable) exhausted(counter, key string, scale time.Duration, end, now time.Time) bool {
	t.once.Do(func() {
		t.seed = maphash.MakeSeed()
		t.slots = make([]spikeSlot, spikeSlots)
	})
	var mh maphash.Hash
	mh.SetSeed(t.seed)
	mh.WriteString(counter)
	mh.WriteByte(0)
	mh.WriteString(key)
	h := mh.Sum64()
	s := &t.slots[h%spikeSlots]
	endMs, scaleMs := end.UnixMilli(), scale.Milliseconds()
	start := endMs - scaleMs
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen && s.h == h && s.end == endMs {
		return false // this window was already counted as exhausted
	}
	spike := s.seen && s.h == h &&
		start >= s.end && start-s.end <= scaleMs/10 &&
		now.UnixMilli()-start < scaleMs/10
	s.h, s.end, s.seen = h, endMs, true
	return spike
}
