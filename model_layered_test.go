package ratedb_test

import (
	"fmt"
	"time"

	"github.com/ratedb/ratedb"
)

// stepLayered runs one random operation on a Layered limiter and compares
// it with the model.
func (m *modelRun) stepLayered() error {
	li := m.rng.IntN(len(m.lays))
	l, ly := m.lays[li], m.ls[li]
	key := m.keys[m.rng.IntN(len(m.keys))]
	switch r := m.rng.IntN(11); {
	case r < 6:
		return m.hitLayered(li, l, ly, key, 1+m.rng.Int64N(3))
	case r < 7:
		inc := 1 + m.rng.Int64N(5)
		now := m.tick()
		if err := m.resolveLayered(li, key, now); err != nil {
			return err
		}
		m.logf("[L%d] Inc(%s, %d)", li, key, inc)
		got, err := ly.Inc(ctx, key, inc)
		if err != nil {
			return fmt.Errorf("Layered.Inc: %w", err)
		}
		l.capStore(key, now)
		ws := make([]mWin, len(l.tiers))
		for i := range ws {
			c, end := l.current(key, i, now)
			ws[i] = mWin{count: c + inc, end: end}
			if len(got) != len(ws) || got[i] != c+inc {
				return fmt.Errorf("[L%d] Inc(%s): got %v, model tier %d = %d", li, key, got, i, c+inc)
			}
		}
		l.wins[key] = ws
	case r < 8:
		m.logf("[L%d] Reset(%s)", li, key)
		if err := ly.Reset(ctx, key); err != nil {
			return fmt.Errorf("Layered.Reset: %w", err)
		}
		delete(l.wins, key)
	case r < 9:
		return m.refundLayered(li, l, ly, key, 1+m.rng.Int64N(4))
	case r < 10:
		return m.undoLayered(li, l, ly, key)
	default:
		return m.checkLayered(li, key)
	}
	return nil
}

// refundLayered checks one Layered Refund: every tier with an open window
// gives amount back, never below zero, and a key with no open window in
// any tier is left alone (the DB opens no entry, so nothing is capped).
func (m *modelRun) refundLayered(li int, l *mLay, ly *ratedb.Layered, key string, amount int64) error {
	now := m.tick()
	if err := m.resolveLayered(li, key, now); err != nil {
		return err
	}
	m.logf("[L%d] Refund(%s, %d)", li, key, amount)
	got, err := ly.Refund(ctx, key, amount)
	if err != nil {
		return fmt.Errorf("Layered.Refund: %w", err)
	}
	want := make([]int64, len(l.tiers))
	ws, ok := l.wins[key]
	open := false
	for i := range ws {
		open = open || now < ws[i].end
	}
	if ok && open {
		l.capStore(key, now)
		for i := range ws {
			if now < ws[i].end {
				ws[i].count = max(0, ws[i].count-amount)
				want[i] = ws[i].count
			}
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("[L%d] Refund(%s, %d): got %v, model %v", li, key, amount, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("[L%d] Refund(%s, %d): got %v, model %v", li, key, amount, got, want)
		}
	}
	return nil
}

// undoLayered takes back the last allowed Hit on key, if there was one:
// the model gives the increment back in every tier whose window, as the
// clock model caps it now, is still the one the hit counted in. If no tier
// is, the DB leaves the key alone (it opens no entry, so nothing is
// capped).
func (m *modelRun) undoLayered(li int, l *mLay, ly *ratedb.Layered, key string) error {
	h, ok := m.lhits[mHitKey{li, key}]
	if !ok {
		return nil
	}
	now := m.tick()
	if err := m.resolveLayered(li, key, now); err != nil {
		return err
	}
	m.logf("[L%d] Undo(%s, hit of %d)", li, key, h.inc)
	if err := ly.Undo(ctx, key, h.r, h.inc); err != nil {
		return fmt.Errorf("Layered.Undo: %w", err)
	}
	ws, ok := l.wins[key]
	if !ok {
		return m.checkLayered(li, key)
	}
	same := func(i int) bool {
		w := mCap(ws[i], now, l.scale(i))
		return now < w.end && w.end == h.r.Tiers[i].ResetAt.UnixMilli()
	}
	match := false
	for i := range ws {
		match = match || same(i)
	}
	if match {
		l.capStore(key, now)
		for i := range ws {
			if now < ws[i].end && ws[i].end == h.r.Tiers[i].ResetAt.UnixMilli() {
				ws[i].count = max(0, ws[i].count-h.inc)
			}
		}
	}
	return m.checkLayered(li, key)
}

// hitLayered checks one Layered Hit: allowed only if every tier has room,
// then counted in every tier; the binding tier is the denying tier that
// frees up last (first such tier on ties), or when allowed the tier with the
// least room left (of those with as little, the one that frees up last;
// first on remaining ties).
func (m *modelRun) hitLayered(li int, l *mLay, ly *ratedb.Layered, key string, inc int64) error {
	now := m.tick()
	if err := m.resolveLayered(li, key, now); err != nil {
		return err
	}
	m.logf("[L%d] Hit(%s, inc %d)", li, key, inc)
	got, err := ly.Hit(ctx, key, inc)
	if err != nil {
		return fmt.Errorf("Layered.Hit: %w", err)
	}
	l.capStore(key, now)
	trs := make([]ratedb.TierResult, len(l.tiers))
	allowed := true
	for i, t := range l.tiers {
		c, end := l.current(key, i, now)
		fits := c+inc <= t.Limit
		allowed = allowed && fits
		trs[i] = ratedb.TierResult{Scale: t.Scale, Limit: t.Limit, Count: c, ResetAt: time.UnixMilli(end), Fits: fits}
	}
	if allowed {
		ws := make([]mWin, len(trs))
		for i := range trs {
			trs[i].Count += inc
			ws[i] = mWin{count: trs[i].Count, end: trs[i].ResetAt.UnixMilli()}
		}
		l.wins[key] = ws
		m.allowed++
		if m.lhits == nil {
			m.lhits = map[mHitKey]mHit{}
		}
		m.lhits[mHitKey{li, key}] = mHit{got, inc}
	} else {
		m.denied++
	}
	bind := -1
	for i := range trs {
		trs[i].Remaining = max(0, trs[i].Limit-trs[i].Count)
		switch {
		case bind < 0 && (allowed || !trs[i].Fits):
			bind = i
		case allowed && trs[i].Remaining < trs[bind].Remaining:
			bind = i
		case allowed && trs[i].Remaining == trs[bind].Remaining && trs[i].ResetAt.After(trs[bind].ResetAt):
			bind = i
		case !allowed && !trs[i].Fits && trs[i].ResetAt.After(trs[bind].ResetAt):
			bind = i
		}
	}
	b := trs[bind]
	want := ratedb.Result{Allowed: allowed, Count: b.Count, Limit: b.Limit, Remaining: b.Remaining,
		ResetAt: b.ResetAt, Scale: b.Scale, Tier: bind, Tiers: trs}
	if !allowed {
		want.RetryAfter = time.Duration(b.ResetAt.UnixMilli()-now) * time.Millisecond
	}
	if !sameResult(got, want) {
		return fmt.Errorf("[L%d] Hit(%s, %d) at %d:\n got  %+v\n want %+v", li, key, inc, now, got, want)
	}
	return nil
}

func sameResult(a, b ratedb.Result) bool {
	if a.Allowed != b.Allowed || a.Count != b.Count || a.Limit != b.Limit || a.Remaining != b.Remaining ||
		!a.ResetAt.Equal(b.ResetAt) || a.RetryAfter != b.RetryAfter || a.Scale != b.Scale || a.Tier != b.Tier ||
		len(a.Tiers) != len(b.Tiers) {
		return false
	}
	for i := range a.Tiers {
		x, y := a.Tiers[i], b.Tiers[i]
		if x.Scale != y.Scale || x.Limit != y.Limit || x.Count != y.Count || x.Remaining != y.Remaining ||
			!x.ResetAt.Equal(y.ResetAt) || x.Fits != y.Fits {
			return false
		}
	}
	return true
}

// checkLayered compares Get and ExpiresAt of one key of a Layered limiter
// with the model.
func (m *modelRun) checkLayered(li int, key string) error {
	l, ly := m.lays[li], m.ls[li]
	now := m.tick()
	if err := m.resolveLayered(li, key, now); err != nil {
		return err
	}
	n, err := ly.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("Layered.Get: %w", err)
	}
	ends, err := ly.ExpiresAt(ctx, key)
	if err != nil {
		return fmt.Errorf("Layered.ExpiresAt: %w", err)
	}
	for i := range l.tiers {
		var wantN int64
		var wantEnd time.Time
		if ws, ok := l.wins[key]; ok && now < ws[i].end {
			w := mCap(ws[i], now, l.scale(i))
			wantN, wantEnd = w.count, time.UnixMilli(w.end)
		}
		if len(n) != len(l.tiers) || len(ends) != len(l.tiers) || n[i] != wantN || !ends[i].Equal(wantEnd) {
			return fmt.Errorf("[L%d] key %s tier %d at %d: Get %v ExpiresAt %v, model %d %d", li, key, i, now, n, ends, wantN, msOrZero(wantEnd))
		}
	}
	return nil
}
