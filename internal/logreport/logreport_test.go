package logreport

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The report logs through any handler: a JSON handler embeds it as an
// object, a text handler prints it as JSON on the same line.
func TestReportAsLogAttribute(t *testing.T) {
	rep := []byte(`{"kv":{"total_count":1,"top_requests":[]}}`)
	var out []byte
	logger := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) { out = append(out, p...) }), nil))
	Log(logger, slog.LevelWarn, "kvwire: test", "report", rep)
	var line struct {
		Msg    string          `json:"msg"`
		Report json.RawMessage `json:"report"`
	}
	require.NoError(t, json.Unmarshal(out, &line))
	require.JSONEq(t, string(rep), string(line.Report))

	out = out[:0]
	logger = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) { out = append(out, p...) }), nil))
	Log(logger, slog.LevelWarn, "kvwire: test", "report", rep)
	require.Contains(t, string(out), `report="{\"kv\":{\"total_count\":1,\"top_requests\":[]}}"`)
	require.Equal(t, 1, strings.Count(string(out), "\n"), "one line")
}

type writerFunc func(p []byte)

func (w writerFunc) Write(p []byte) (int, error) { w(p); return len(p), nil }
