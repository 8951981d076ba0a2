package config

import (
	"bufio"
	"bytes"
	"strings"

	"github.com/limiterd/limiterd"
)

// GroupKeyHelp returns the one-line help of every group key, as the
// shipped config.toml documents it in its "# Keys" comment above the group
// tables ("sliding_window_duration" → "ms; length of the sliding window"),
// for the dashboard's group forms. A key's help continued on lines indented
// further (the algorithm's choices) is joined with "; ". The map is new on
// every call.
func GroupKeyHelp() map[string]string {
	help := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(limiterd.DefaultConfig))
	in, last := false, ""
	for sc.Scan() {
		body, comment := strings.CutPrefix(sc.Text(), "#")
		switch {
		case comment && strings.HasPrefix(strings.TrimSpace(body), "Keys"):
			in = true
		case in && comment && strings.HasPrefix(body, "    ") && last != "":
			// A continuation of the last key's help.
			help[last] = strings.TrimSuffix(help[last], ":") + "; " + strings.Join(strings.Fields(body), " ")
		case in && comment && strings.HasPrefix(body, "   "):
			// A key line: indented, the key, then its help.
			if key, text, ok := strings.Cut(strings.TrimSpace(body), " "); ok {
				help[key], last = strings.TrimSpace(text), key
			}
		default:
			in, last = false, ""
		}
	}
	return help
}
