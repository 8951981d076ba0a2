package config

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize parses a size in bytes: an integer, optionally followed by a
// unit, B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000),
// as in "64MiB" or "512 KiB".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && '0' <= t[i] && t[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf(`must be a size such as "64MiB", "512KiB" or "1048576", got %q`, s)
	}
	var mul int64
	switch strings.TrimSpace(t[i:]) {
	case "", "B":
		mul = 1
	case "KiB":
		mul = 1 << 10
	case "MiB":
		mul = 1 << 20
	case "GiB":
		mul = 1 << 30
	case "KB":
		mul = 1e3
	case "MB":
		mul = 1e6
	case "GB":
		mul = 1e9
	default:
		return 0, fmt.Errorf(`must be a size such as "64MiB", "512KiB" or "1048576" (units B, KiB, MiB, GiB, KB, MB, GB), got %q`, s)
	}
	if n > (1<<62)/mul {
		return 0, fmt.Errorf("must be at most 4 EiB, got %q", s)
	}
	return n * mul, nil
}

// FormatSize writes n as ParseSize reads it, in the largest binary unit
// that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
