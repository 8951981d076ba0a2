package ui

import (
	"math"
	"testing"
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
