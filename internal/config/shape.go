package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// Bounds a configuration file is held to before it is parsed, so that a
// file made to be slow (megabytes of it, or arrays nested thousands deep,
// which the parser walks recursively) is refused in milliseconds, at the
// start and on a reload alike, with the bound named (decision 191).
const (
	// MaxFileBytes bounds the file's size. The shipped config is 20 KiB; a
	// hundred thousand exempt CIDRs are about 2 MiB.
	MaxFileBytes = 16 << 20
	// MaxNesting bounds how deep arrays and inline tables nest. limiterd's
	// own keys nest two deep at most.
	MaxNesting = 32
)

// readFile reads the file at path, refusing one over MaxFileBytes without
// reading the rest of it.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s: the file is over %d MiB: a configuration file is at most that", path, MaxFileBytes>>20)
	}
	return b, nil
}

// checkShape refuses a TOML document over MaxFileBytes or whose arrays and
// inline tables nest deeper than MaxNesting, naming the line; it reads
// strings and comments as TOML does, so that brackets in them do not
// count. It does not check the syntax otherwise: the parser does.
func checkShape(b []byte) error {
	if len(b) > MaxFileBytes {
		return fmt.Errorf("the file is over %d MiB: a configuration file is at most that", MaxFileBytes>>20)
	}
	depth, line := 0, 1
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '\n':
			line++
		case '#':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			i-- // the newline counts the line
		case '"', '\'':
			end, lines := skipString(b, i)
			line += lines
			i = end
		case '[', '{':
			if depth++; depth > MaxNesting {
				return fmt.Errorf("line %d: arrays and inline tables nest over %d deep: a configuration nests 2 at most", line, MaxNesting)
			}
		case ']', '}':
			depth = max(0, depth-1)
		}
	}
	return nil
}

// skipString returns the index of the last byte of the string that opens
// at b[i] (a basic or literal string, single- or multi-line) and how many
// newlines it holds. An unterminated string runs to the end.
func skipString(b []byte, i int) (end, lines int) {
	q := b[i]
	delim := []byte{q}
	if bytes.HasPrefix(b[i:], []byte{q, q, q}) {
		delim = []byte{q, q, q}
	}
	j := i + len(delim)
	for j < len(b) {
		switch {
		case q == '"' && b[j] == '\\' && j+1 < len(b):
			if b[j+1] == '\n' {
				lines++
			}
			j += 2
			continue
		case bytes.HasPrefix(b[j:], delim):
			// A multi-line string may end with up to two more quotes.
			k := j + len(delim)
			for len(delim) == 3 && k < len(b) && b[k] == q && k-j < 5 {
				k++
			}
			return k - 1, lines
		case b[j] == '\n':
			if len(delim) == 1 {
				return j - 1, lines // an unterminated one-line string: the parser says so
			}
			lines++
		}
		j++
	}
	return len(b) - 1, lines
}
