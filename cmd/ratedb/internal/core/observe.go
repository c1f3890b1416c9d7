package core

import "time"

// observe reports a decided set to the Observer and to the spike table.
func (c *Core) observe(checks []Check, d Decision, start time.Time) {
	obs := c.opts.Observer
	if obs == nil {
		return
	}
	now := c.opts.Clock()
	for i, ch := range checks {
		if ch.Refund {
			continue // not a check: nothing to count in the metrics
		}
		r := d.Results[i]
		api, name := ch.Limit.API, ch.Limit.Name
		// The check's own verdict, as its result reports it: a check that
		// fit in a set another check denied is not a denial of its rule.
		obs.Checked(api, name, r.Allowed)
		if r.Counted && r.Count == ch.Cost {
			obs.WindowOpened(api, name)
		}
		if (r.Counted && r.Remaining == 0) || !r.Allowed {
			res := ch.Limit.res.Load()
			if res != nil && c.spikes.exhausted(res.counter, ch.Key, r.Scale, r.ResetAt, now) {
				obs.BoundarySpike(api, name)
			}
		}
	}
	obs.Decided(time.Since(start))
}
