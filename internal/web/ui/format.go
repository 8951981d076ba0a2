package ui

import (
	"fmt"
	"strconv"
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

// rate says x events per second: "0/s", "0.05/s", "2.5/s", "120/s".
func rate(x float64) string {
	switch {
	case x <= 0:
		return "0/s"
	case x < 0.095:
		return strconv.FormatFloat(x, 'f', 2, 64) + "/s"
	case x < 9.95:
		return strconv.FormatFloat(x, 'f', 1, 64) + "/s"
	}
	return strconv.FormatFloat(x, 'f', 0, 64) + "/s"
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
