package ui

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/web/ui/templates"
)

// One time convention everywhere: UTC, with the browser's local time on
// hover (decision 127).

// stamp is t as the pages show it; the zero time shows as "—".
func stamp(t time.Time) templates.Stamp {
	if t.IsZero() {
		return templates.Stamp{}
	}
	u := t.UTC()
	return templates.Stamp{Datetime: u.Format(time.RFC3339), Text: u.Format("2006-01-02 15:04:05") + " UTC"}
}

// rate says x events per second: number(x) + "/s".
func rate(x float64) string { return number(x) + "/s" }

// number says x for a person, as app.js's fmtNum draws it on the charts
// (the two follow one rule, and their tests one table): "–" for NaN or
// an infinity; below 10 up to two decimals ("0.05", "9.5"), below 100
// one ("12.5"); whole numbers grouped by thousands to a million ("120",
// "3 093", "30 000"); then three significant digits and a unit ("1.5 M",
// "12.3 M", "1.23 G"). Trailing zeros of a fraction go ("1", not "1.00");
// those of a whole number stay.
func number(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	sign := ""
	if x < 0 {
		sign, x = "-", -x
	}
	var s string
	switch {
	case x < 9.995:
		s = trimZeros(fixed(x, 2))
	case x < 99.95:
		s = trimZeros(fixed(x, 1))
	case x < 999_999.5:
		s = count(int64(math.Round(x)))
	default:
		unit, div := " M", 1e6
		if x >= 999.5e6 {
			unit, div = " G", 1e9
		}
		v := x / div
		digits := 2
		if v >= 99.95 {
			digits = 0
		} else if v >= 9.995 {
			digits = 1
		}
		s = trimZeros(fixed(v, digits)) + unit
	}
	if s == "0" {
		return "0"
	}
	return sign + s
}

// fixed writes x ≥ 0 with digits decimals as JavaScript's toFixed does:
// from its exact binary value, a tie rounded up (strconv rounds it to
// even: 0.125 would be "0.12" here and "0.13" on a chart).
func fixed(x float64, digits int) string {
	return new(big.Rat).SetFloat64(x).FloatString(digits)
}

// trimZeros drops the trailing zeros of a decimal fraction, and its point
// when nothing is left after it: "2.50" → "2.5", "1.00" → "1"; a whole
// number stays as it is.
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// pct says part of whole in per cent: "—" of nothing, "<1 %" of a little.
func pct(part, whole float64) string {
	switch {
	case whole <= 0:
		return "—"
	case part <= 0:
		return "0 %"
	case part/whole < 0.01:
		return "<1 %"
	}
	return strconv.FormatFloat(100*part/whole, 'f', 0, 64) + " %"
}

// count writes n with thin spaces between thousands: "12 034".
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ' ')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// msText says a number of milliseconds in words: "1 s", "30 s", "2 min",
// "250 ms".
func msText(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second || d%time.Second != 0:
		return fmt.Sprintf("%d ms", ms)
	case d < 2*time.Minute || d%time.Minute != 0:
		return fmt.Sprintf("%d s", d/time.Second)
	case d < 2*time.Hour || d%time.Hour != 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return fmt.Sprintf("%d h", d/time.Hour)
}

// waitText says a wait of ms for a person, rounded up (the wait is not
// over before): in ms below a second, in seconds to a tenth below a
// minute, in minutes and seconds below an hour, then as spanText does.
func waitText(ms int64) string {
	secs := (ms + 999) / 1000
	switch {
	case ms < 1000:
		return fmt.Sprintf("%d ms", ms)
	case ms%1000 == 0 && ms < 60_000:
		return fmt.Sprintf("%d s", ms/1000)
	case ms < 60_000:
		return fmt.Sprintf("%.1f s", float64((ms+99)/100)/10)
	case secs < 3600 && secs%60 == 0:
		return fmt.Sprintf("%d min", secs/60)
	case secs < 3600:
		return fmt.Sprintf("%d min %d s", secs/60, secs%60)
	}
	return spanText(time.Duration(secs) * time.Second)
}

// spanText says a duration for a person, to the second below a minute,
// then in two units at most: "45 s", "12 min", "3 h 12 min", "2 d 4 h".
func spanText(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 24*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	}
	days, h := int(d.Hours())/24, int(d.Hours())%24
	if h == 0 {
		return fmt.Sprintf("%d d", days)
	}
	return fmt.Sprintf("%d d %d h", days, h)
}

// agoText says how long before now t was: "12 s ago", "3 h 12 min ago".
func agoText(now, t time.Time) string {
	if t.After(now) {
		return "just now"
	}
	return spanText(now.Sub(t)) + " ago"
}

// bytesText says a size in bytes: "812 B", "64 KiB", "1.2 MiB", "3.5 GiB".
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	for f >= unit && u < 4 {
		f /= unit
		u++
	}
	return number(f) + " " + [...]string{"", "KiB", "MiB", "GiB", "TiB"}[u]
}

// msValue says a latency in ms: "0.4 ms", "12 ms", "1 230 ms"; "—" for
// none (negative).
func msValue(v float64) string {
	if v < 0 {
		return "—"
	}
	return number(v) + " ms"
}
