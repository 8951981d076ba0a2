package store

import "testing"

func TestCompactDue(t *testing.T) {
	for _, c := range []struct {
		base, log int64
		records   int
		want      bool
	}{
		{0, 0, 0, false},
		{0, compactMinBytes, 10, false}, // a small log: never
		{0, compactMinBytes + 1, 10, true},
		{30 << 20, 10 << 20, 40, false},
		{30 << 20, 10<<20 + 1, 40, true}, // past a third of the base
		{30 << 20, 1 << 20, maxLogRecords - 1, false},
		{30 << 20, 1 << 20, maxLogRecords, true}, // many saves
	} {
		if got := compactDue(c.base, c.log, c.records); got != c.want {
			t.Errorf("compactDue(base %d, log %d, %d records) = %v, want %v", c.base, c.log, c.records, got, c.want)
		}
	}
}
