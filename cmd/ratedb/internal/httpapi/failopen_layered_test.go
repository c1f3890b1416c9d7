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
	_, a := checkOnce(t, rules.Spec{Tiers: []rules.TierSpec{{Limit: &hour, Window: "1h"}, {Limit: &minute, Window: "1m"}}},
		store, core.Options{FailOpen: true})
	assert.True(t, a.Data.FailOpen)
	assert.EqualValues(t, 10, a.Data.Limit, "the binding tier is the one with the least room")
	assert.EqualValues(t, 10, a.Data.Remain)
	assert.Len(t, a.Data.Tiers, 2, "a layered rule's answer carries its tiers")
}
