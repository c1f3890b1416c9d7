package serve

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --log-level takes the four documented names, in any case, and nothing
// else: slog's own syntax would take "warn+1" or "INFO-4", levels the flag
// does not name.
func TestParseLevel(t *testing.T) {
	for s, want := range map[string]slog.Level{"debug": slog.LevelDebug, "INFO": slog.LevelInfo, "Warn": slog.LevelWarn, "error": slog.LevelError} {
		got, err := parseLevel(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "warn+1", "INFO-4", "warning", "3", " info"} {
		_, err := parseLevel(s)
		assert.ErrorContains(t, err, "use debug, info, warn or error", "%q", s)
	}
}
