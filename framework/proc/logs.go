package proc

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
)

// maxTailBytes caps how much of the log Tail reads, so one enormous line cannot blow up an error
// message.
const maxTailBytes = 1 << 20

// logChunk is the read size for Tail and LogContains; a variable so tests can exercise chunk
// boundaries with small files.
var logChunk = 64 << 10

// Tail returns the last n lines of the log file, without the final newline. It returns "" when
// there is no log file or it cannot be read, and reads at most the last 1 MiB.
func (p *Process) Tail(n int) string {
	if p.spec.LogFile == "" || n <= 0 {
		return ""
	}
	s, _ := tailFile(p.spec.LogFile, n)
	return s
}

// tailFile reads backwards from the end in chunks until it has n lines.
func tailFile(path string, n int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", err
	}
	var buf []byte // the file's last len(buf) bytes
	off := size
	for off > 0 && len(buf) < maxTailBytes {
		step := int64(min(logChunk, maxTailBytes-len(buf)))
		step = min(step, off)
		off -= step
		chunk := make([]byte, step)
		if _, err := f.ReadAt(chunk, off); err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		buf = append(chunk, buf...)
		// n lines need n newlines before them (or the file's start), plus the final newline.
		if bytes.Count(bytes.TrimSuffix(buf, []byte("\n")), []byte("\n")) >= n {
			break
		}
	}
	text := strings.TrimSuffix(string(buf), "\n")
	lines := strings.Split(text, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n"), nil
}

// LogContains reports whether the log file contains s, e.g. "address already in use" to detect a
// port collision. It scans the whole file in chunks.
func (p *Process) LogContains(s string) bool {
	if p.spec.LogFile == "" {
		return false
	}
	ok, _ := fileContains(p.spec.LogFile, []byte(s))
	return ok
}

func fileContains(path string, needle []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	// Keep len(needle)-1 bytes of the previous chunk so a match across a boundary is found.
	keep := max(len(needle)-1, 0)
	buf := make([]byte, 0, keep+logChunk)
	chunk := make([]byte, logChunk)
	for {
		k, err := f.Read(chunk)
		buf = append(buf, chunk[:k]...)
		if bytes.Contains(buf, needle) {
			return true, nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return false, nil
			}
			return false, err
		}
		if len(buf) > keep {
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
	}
}
