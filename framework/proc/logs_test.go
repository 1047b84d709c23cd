package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func logProcess(t *testing.T, content string) *Process {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.log")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return &Process{spec: Spec{Name: "x", LogFile: path}}
}

// smallChunks makes the chunked readers cross many chunk boundaries on small files.
func smallChunks(t *testing.T, n int) {
	old := logChunk
	logChunk = n
	t.Cleanup(func() { logChunk = old })
}

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestTail(t *testing.T) {
	for _, chunk := range []int{3, 7, 64 << 10} {
		t.Run(fmt.Sprint("chunk=", chunk), func(t *testing.T) {
			smallChunks(t, chunk)
			p := logProcess(t, numbered(100))
			assert.Equal(t, "line 98\nline 99\nline 100", p.Tail(3))
			assert.Equal(t, "line 100", p.Tail(1))
			assert.Equal(t, strings.TrimSuffix(numbered(100), "\n"), p.Tail(1000))
			assert.Equal(t, "", p.Tail(0))

			assert.Equal(t, "b\nc", logProcess(t, "a\nb\nc").Tail(2), "no final newline")
			assert.Equal(t, "", logProcess(t, "").Tail(5))
			assert.Equal(t, "\nx", logProcess(t, "a\n\nx\n").Tail(2), "empty lines count")
		})
	}
	assert.Equal(t, "", (&Process{spec: Spec{LogFile: filepath.Join(t.TempDir(), "missing")}}).Tail(3))
	assert.Equal(t, "", (&Process{}).Tail(3))
}

func TestTailCapsHugeLines(t *testing.T) {
	p := logProcess(t, "first\n"+strings.Repeat("x", 3*maxTailBytes)+"\nlast\n")
	tail := p.Tail(3)
	assert.LessOrEqual(t, len(tail), maxTailBytes)
	assert.True(t, strings.HasSuffix(tail, "\nlast"))
	assert.NotContains(t, tail, "first")
}

func TestLogContains(t *testing.T) {
	const needle = "address already in use"
	content := strings.Repeat("noise ", 50) + "listen tcp 127.0.0.1:2379: bind: " + needle + "\n" + strings.Repeat("more ", 50)
	for _, chunk := range []int{1, 5, len(needle) - 1, len(needle), 64 << 10} {
		t.Run(fmt.Sprint("chunk=", chunk), func(t *testing.T) {
			smallChunks(t, chunk)
			p := logProcess(t, content)
			assert.True(t, p.LogContains(needle))
			assert.True(t, p.LogContains("more more"))
			assert.True(t, p.LogContains("noise"))
			assert.False(t, p.LogContains("address already in used"))
			assert.True(t, p.LogContains(""))
		})
	}
	assert.False(t, (&Process{}).LogContains("x"))
	assert.False(t, (&Process{spec: Spec{LogFile: filepath.Join(t.TempDir(), "missing")}}).LogContains("x"))
}

func TestParseVmRSS(t *testing.T) {
	v, err := parseVmRSS("Name:\tetcd\nVmPeak:\t  999 kB\nVmRSS:\t   12345 kB\nRssAnon:\t 1 kB\n")
	require.NoError(t, err)
	assert.Equal(t, uint64(12345*1024), v)

	_, err = parseVmRSS("Name:\tzombie\nState:\tZ (zombie)\n")
	assert.Error(t, err)
	_, err = parseVmRSS("VmRSS:\t12 MB\n")
	assert.Error(t, err)
}

func TestParseStatTicks(t *testing.T) {
	// A command name with spaces and parentheses must not shift the fields.
	stat := "4242 (evil) name (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 1000 123456 789 18446744073709551615\n"
	ticks, err := parseStatTicks(stat)
	require.NoError(t, err)
	assert.Equal(t, uint64(325), ticks)

	_, err = parseStatTicks("4242 (short) S 1 2 3")
	assert.Error(t, err)
	_, err = parseStatTicks("no parenthesis")
	assert.Error(t, err)
}

func TestRSSFileBytesOfThisProcess(t *testing.T) {
	p := start(t, helperSpec(t, "rss-file", "block"))
	var file uint64
	var err error
	// Right after the fork the child has not mapped its binary yet.
	for deadline := time.Now().Add(5 * time.Second); file == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if file, err = p.RSSFileBytes(); err != nil {
			t.Fatal(err)
		}
	}
	rss, err := p.RSSBytes()
	if err != nil {
		t.Fatal(err)
	}
	if file == 0 || file > rss {
		t.Fatalf("RssFile %d of RSS %d", file, rss)
	}
}
