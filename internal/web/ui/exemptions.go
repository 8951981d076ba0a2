package ui

import (
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/web/ui/templates"
)

// exemptionLists are the exemptions page's lists, in order: kind, title
// and the config.toml key of the file's entries ("" when the file has
// none: config.Limiter leaves the deny list empty, the deny list is live
// state, but a file entry would still be shown).
var exemptionLists = []struct {
	kind           live.ExemptionKind
	title, fileKey string
}{
	{live.ExemptPeer, "Exempt peers and CIDRs", "peers.exempt"},
	{live.ExemptPath, "Exempt paths", "routes.exempt_paths"},
	{live.DenyPeer, "Deny list (answered 403)", ""},
}

// exemptions is the exemptions page's data: per kind, the file's entries
// (read-only) then the live ones (removable).
func (d *Dashboard) exemptions() templates.Exemptions {
	now := d.now()
	live, file := d.live.Exemptions()
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
				row := templates.ExemptionRow{Kind: string(x.Kind), Value: x.Value, Note: x.Note}
				if !x.Expires.IsZero() {
					row.Expires, row.ExpiresIn = stamp(x.Expires), "in "+spanText(x.Expires.Sub(now))
				}
				list.Rows = append(list.Rows, row)
			}
		}
		e.Lists = append(e.Lists, list)
	}
	return e
}
