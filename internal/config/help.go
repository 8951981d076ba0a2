package config

import (
	"strconv"
	"strings"
)

// GroupKeyHelp returns the one-line help of every group key (its 2.9.7
// names aside), as keys says it ("sliding_window_duration" → "ms; length
// of the sliding window"), for the dashboard's group forms. The map is new
// on every call.
func GroupKeyHelp() map[string]string {
	help := map[string]string{}
	for _, k := range keys {
		if name, ok := strings.CutPrefix(k.Name, groupPrefix+"."); ok && k.Alias == "" {
			help[name] = k.HelpLine()
		}
	}
	return help
}

// HelpLine is the help of k in one line, with its values: `what decides
// …: "hybrid": the Arweave node's …; "token_bucket": …`, or `the log's
// format: "text" or "json"`.
func (k Key) HelpLine() string {
	if len(k.Values) == 0 {
		return k.Help
	}
	described := false
	var names []string
	for _, v := range k.Values {
		names = append(names, strconv.Quote(v.Name))
		described = described || v.Help != ""
	}
	if !described {
		last := len(names) - 1
		if last == 0 {
			return k.Help + ": " + names[0]
		}
		return k.Help + ": " + strings.Join(names[:last], ", ") + " or " + names[last]
	}
	for i, v := range k.Values {
		if v.Help != "" {
			names[i] += ": " + v.Help
		}
	}
	return k.Help + ": " + strings.Join(names, "; ")
}
