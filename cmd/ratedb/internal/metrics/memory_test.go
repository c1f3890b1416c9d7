package metrics_test

import (
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratedbmetrics "github.com/ratedb/ratedb/cmd/ratedb/internal/metrics"
)

// ratedb_memory_in_use_bytes is the memory the runtime holds from the OS:
// more than nothing, and no more than all it has mapped (found by mutation
// testing: subtracting the total from the released heap wrapped around to
// about 1.8e19 bytes, and no test failed).
func TestGapMemoryInUseIsWithinWhatTheRuntimeMapped(t *testing.T) {
	mfs, err := ratedbmetrics.New().Registry().Gather()
	require.NoError(t, err)
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	total := float64(s[0].Value.Uint64())
	for _, mf := range mfs {
		if mf.GetName() != "ratedb_memory_in_use_bytes" {
			continue
		}
		require.Len(t, mf.GetMetric(), 1)
		v := mf.GetMetric()[0].GetGauge().GetValue()
		assert.Positive(t, v)
		assert.LessOrEqual(t, v, total, "in use, of %v bytes mapped", total)
		return
	}
	t.Fatal("ratedb_memory_in_use_bytes is not exported")
}
