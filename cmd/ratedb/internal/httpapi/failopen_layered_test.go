package httpapi_test

import (
	"fmt"
	"testing"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/stretchr/testify/assert"
)

// A fail-open answer for a layered rule follows the layered contract: the
// top level reports the binding tier (nothing counted: the tier with the
// least room, i.e. the smallest limit), and data carries "tiers". It
// reported the first tier as written (here 1000 an hour, while 10 a minute
// binds) and no tiers.
func TestFailOpenLayeredReportsTheBindingTier(t *testing.T) {
	hour, minute := int64(1000), int64(10)
	store := &fakeStore{err: fmt.Errorf("%w: down", ratedb.ErrUnavailable)}
	w, a := checkOnce(t, rules.Spec{Tiers: []rules.TierSpec{{Limit: &hour, Window: "1h"}, {Limit: &minute, Window: "1m"}}},
		store, core.Options{FailOpen: true})
	assert.True(t, a.Data.FailOpen)
	assert.EqualValues(t, 10, a.Data.Limit, "the binding tier is the one with the least room")
	assert.EqualValues(t, 10, a.Data.Remain)
	assert.Len(t, a.Data.Tiers, 2, "a layered rule's answer carries its tiers")
	// No window decided: the README says reset_in_second is 0, at the top
	// level and in every tier.
	assert.Contains(t, w.Body.String(), `"reset_in_second":0,"tiers":[{"limit":1000,"remain":1000,"reset_in_second":0,"window":"1h0m0s"},{"limit":10,"remain":10,"reset_in_second":0,"window":"1m0s"}],"fail_open":true}`)
}
