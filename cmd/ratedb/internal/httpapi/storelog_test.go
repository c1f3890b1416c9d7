package httpapi_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
)

// While the store is down (here closed) every check answers 503: the log
// gets about one line a second, not one a check, which clients could use to
// fill it.
func TestStoreFailuresLogOnceASecond(t *testing.T) {
	db, err := ratedb.Open("", nil)
	require.NoError(t, err)
	var buf bytes.Buffer
	s := serverOn(t, db, 10, time.Hour, slog.New(slog.NewTextHandler(&buf, nil)))
	require.NoError(t, db.Close())
	start := time.Now()
	for range 50 {
		code, _ := s.do(t, http.MethodPost, "/v1/check", "c", `{"client_id":"u","route":"/r"}`)
		require.Equal(t, http.StatusServiceUnavailable, code)
	}
	lines := strings.Count(buf.String(), "store failed")
	// One line a second of the loop (it takes milliseconds).
	assert.LessOrEqual(t, lines, 1+int(time.Since(start)/time.Second), "log lines for 50 failed checks")
	assert.GreaterOrEqual(t, lines, 1)
}
