package ratedb

import (
	"fmt"
	"sync"
	"time"
)

// The snapshot backlog is what a flood of new keys fills: every new window a
// hit opens is changed, and with a file it stays in memory until a snapshot
// has written it, even after the cache declined or evicted it. Without a
// budget, new keys arriving faster than bbolt writes them grow memory
// without bound.
//
// The budget is on windows in memory, the quantity that costs memory: a call
// that would bring a window into memory (open a new one, or reload one from
// the file) first waits while WindowsInMemory >= MaxHotKeys +
// MaxSnapshotBacklog. Waiting means writing: the call runs a snapshot itself
// if none is running, else it waits for the running one to commit its next
// batch (whose cold windows then leave memory). Each call that passed the
// check adds at most one window, so
//
//	WindowsInMemory <= MaxHotKeys + MaxSnapshotBacklog + calls in progress.
//
// Calls on windows already in memory never wait, and no call is ever
// answered wrongly: a waiting call is only slower.

// memoryFull reports whether a call that would add a window to memory must
// first wait for the backlog to be written.
func (db *DB) memoryFull() bool {
	return db.persist && db.memWindows.Load() >= db.memLimit
}

// relieve waits until memory has room for one more window (see memoryFull),
// writing the backlog itself when no snapshot is running. It holds no lock
// on entry and returns with none. It returns the error of a snapshot it ran
// that failed: the call then fails, counting nothing.
func (db *DB) relieve() error {
	db.stats.backlogWaits.Add(1)
	for db.memoryFull() {
		ch := db.progress.wait()
		if !db.memoryFull() {
			return nil
		}
		if db.snapMu.TryLock() {
			wrote, err := db.snapshotLocked()
			db.snapMu.Unlock()
			db.maybeBuildPresence()
			if err != nil {
				return fmt.Errorf("ratedb: memory holds MaxHotKeys + MaxSnapshotBacklog windows and writing them failed: %w", err)
			}
			if wrote > 0 {
				continue
			}
		}
		// A snapshot, janitor pass or the audit after Open holds the file,
		// or the windows over the budget are ones the cache has taken but
		// not yet admitted (it drains on its own goroutine): wait for the
		// next batch to commit, or look again shortly.
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// progress wakes the calls waiting in relieve whenever a snapshot batch has
// committed and its cold windows have left memory.
type progress struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next signal.
func (p *progress) wait() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil {
		p.ch = make(chan struct{})
	}
	return p.ch
}

// signal wakes every waiter.
func (p *progress) signal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
}
