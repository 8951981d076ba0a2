package ui

import (
	"math"
	"testing"
	"time"
)

// numberCases is the one table of the number formatter, for number here
// and app.js's fmtNum in a browser (TestAppJSNumbers): what a chart draws
// is what a table says.
var numberCases = []struct {
	in   float64
	want string
}{
	{0, "0"},
	{1, "1"},
	{0.05, "0.05"},
	{0.125, "0.13"}, // a tie, rounded up as toFixed does
	{2.5, "2.5"},
	{9.5, "9.5"},
	{9.999, "10"},
	{10, "10"},
	{12.25, "12.3"},
	{99.96, "100"},
	{100, "100"},
	{120, "120"},
	{300, "300"},
	{1000, "1 000"},
	{3093.4, "3 093"},
	{30000, "30 000"},
	{999_999.4, "999 999"},
	{1_500_000, "1.5 M"},
	{12_340_000, "12.3 M"},
	{250_000_000, "250 M"},
	{1_230_000_000, "1.23 G"},
	{-1, "-1"},
	{-120, "-120"},
	{-30000, "-30 000"},
	{-0.001, "0"},
	{math.NaN(), "–"},
	{math.Inf(1), "–"},
}

func TestNumber(t *testing.T) {
	for _, c := range numberCases {
		if got := number(c.in); got != c.want {
			t.Errorf("number(%v) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := rate(3093); got != "3 093/s" {
		t.Errorf("rate(3093) = %q", got)
	}
}

func TestSpansAndSizes(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0 s", 45 * time.Second: "45 s", 12 * time.Minute: "12 min", 3*time.Hour + 12*time.Minute: "3 h 12 min",
		2 * time.Hour: "2 h", 52 * time.Hour: "2 d 4 h", 48 * time.Hour: "2 d", -time.Second: "0 s",
	} {
		if got := spanText(d); got != want {
			t.Errorf("spanText(%v) = %q, want %q", d, got, want)
		}
	}
	for ms, want := range map[int64]string{1: "1 ms", 400: "400 ms", 2000: "2 s", 10138: "10.2 s", 10101: "10.2 s", 10100: "10.1 s",
		59_950: "60.0 s", 119_001: "2 min", 61_500: "1 min 2 s", 3_725_000: "1 h 2 min"} {
		if got := waitText(ms); got != want {
			t.Errorf("waitText(%d) = %q, want %q", ms, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0 B", 812: "812 B", 64 << 10: "64 KiB", 1_310_720: "1.25 MiB", 3_758_096_384: "3.5 GiB"} {
		if got := bytesText(n); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", n, got, want)
		}
	}
	if got := msValue(-1); got != "—" {
		t.Errorf("msValue(-1) = %q", got)
	}
	if got := msValue(1230.4); got != "1 230 ms" {
		t.Errorf("msValue(1230.4) = %q", got)
	}
}
