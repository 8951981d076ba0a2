package web

import (
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/templates"
)

// fileLists returns the configuration file's exempt peers, exempt paths
// and deny list, as exemption entries.
//
// Live.Exemptions returns the first two only; this reads the deny list
// too, under the same lock.
func (c *Live) fileLists() []limiter.Exemption {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []limiter.Exemption
	for _, p := range c.base.Exempt {
		out = append(out, limiter.Exemption{Kind: limiter.ExemptPeer, Value: prefixString(p)})
	}
	for _, p := range c.base.ExemptPaths {
		out = append(out, limiter.Exemption{Kind: limiter.ExemptPath, Value: p})
	}
	for _, p := range c.base.Deny {
		out = append(out, limiter.Exemption{Kind: limiter.DenyPeer, Value: prefixString(p)})
	}
	return out
}

// exemptionLists are the exemptions page's lists, in order: kind, title
// and the config.toml key of the file's entries ("" when the file has
// none: config.Limiter leaves the deny list empty, the deny list is live
// state, but a file entry would still be shown).
var exemptionLists = []struct {
	kind           limiter.ExemptionKind
	title, fileKey string
}{
	{limiter.ExemptPeer, "Exempt peers and CIDRs", "peers.exempt"},
	{limiter.ExemptPath, "Exempt paths", "routes.exempt_paths"},
	{limiter.DenyPeer, "Deny list (answered 403)", ""},
}

// exemptions is the exemptions page's data: per kind, the file's entries
// (read-only) then the live ones (removable).
func (d *dashboard) exemptions() templates.Exemptions {
	live, _ := d.s.live.Exemptions()
	file := d.s.live.fileLists()
	var e templates.Exemptions
	for _, l := range exemptionLists {
		list := templates.ExemptionList{Kind: string(l.kind), Title: l.title, FileKey: l.fileKey}
		for _, x := range file {
			if x.Kind == l.kind {
				list.Rows = append(list.Rows, templates.ExemptionRow{Kind: string(x.Kind), Value: x.Value, File: true})
			}
		}
		for _, x := range live {
			if x.Kind == l.kind {
				list.Rows = append(list.Rows, templates.ExemptionRow{Kind: string(x.Kind), Value: x.Value, Note: x.Note})
			}
		}
		e.Lists = append(e.Lists, list)
	}
	return e
}
