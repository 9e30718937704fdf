package client

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/vbmap"
)

// Eight operations meeting NOT_MY_VBUCKET bodies that carry the same newer
// (256 KB) config, again and again: the config is parsed once, not once per
// operation or per answer, and every operation succeeds.
func TestConfigInNMVBodiesParsedOnce(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	b := mc.Bucket(mockcluster.DefaultBucket)
	big := paddedConfig(t, mc, b.Rev()+1, 256<<10)
	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"},
		Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: big}, Times: 24})
	defer h.Remove()
	parses := c.cl.ConfigParses()

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 24 answers of 256 KiB under the race detector: on a loaded
			// machine more than the default 2.5 s (the timeout is not
			// what is tested).
			_, err := col.Get(ctx, "k", &GetOptions{Timeout: 10 * time.Second})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, 24, h.Hits())
	require.Eventually(t, func() bool { return c.ConfigVersion().Rev == uint64(b.Rev()+1) },
		10*time.Second, time.Millisecond, "the config was not installed")
	assert.Equal(t, int64(1), c.cl.ConfigParses()-parses, "parses of the config the NMV bodies carried")
}

// A config over vbmap.MaxConfigSize in NOT_MY_VBUCKET bodies is never
// parsed nor installed; the client logs one error saying so (not one per
// answer) and the operation succeeds once the node answers.
func TestConfigOverSizeLimitIsRejectedUnparsed(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	logs := &logCapture{}
	c := connect(t, mc, &Options{Logger: slog.New(logs)})
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	b := mc.Bucket(mockcluster.DefaultBucket)
	held := c.ConfigVersion()
	cfg := paddedConfig(t, mc, b.Rev()+1, 0)
	huge := append(cfg, strings.Repeat(" ", vbmap.MaxConfigSize+1-len(cfg))...)
	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"},
		Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: huge}, Times: 3})
	defer h.Remove()
	parses := c.cl.ConfigParses()

	// Three answers of over 8 MiB each under the race detector on a loaded
	// machine take more than the default 2.5 s: the timeout is not what is
	// tested.
	_, err = col.Get(ctx, "k", &GetOptions{Timeout: 10 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, 3, h.Hits())
	assert.Zero(t, c.cl.ConfigParses()-parses, "a config over the limit was parsed")
	assert.Equal(t, held, c.ConfigVersion())
	errs := logs.find("over the size limit")
	require.Len(t, errs, 1, "one error for three answers")
	assert.Contains(t, errs[0], "ERROR")
	assert.Contains(t, errs[0], fmt.Sprintf("bytes=%d", len(huge)))
	assert.Contains(t, errs[0], fmt.Sprintf("limit=%d", vbmap.MaxConfigSize))
}
