package ui

import (
	"net/url"
	"strconv"

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

// exemptionsPage is how many entries of one list the page shows at once.
const exemptionsPage = 200

// exemptions is the exemptions page's data: per kind, the file's entries
// (read-only) then the live ones (removable), a page of exemptionsPage
// from the offset the query names under the kind (?exempt_peer=200).
func (d *Dashboard) exemptions(q url.Values) templates.Exemptions {
	now := d.now()
	live, file := d.live.Exemptions()
	var e templates.Exemptions
	for _, l := range exemptionLists {
		list := templates.ExemptionList{Kind: string(l.kind), Title: l.title, FileKey: l.fileKey}
		from, _ := strconv.Atoi(q.Get(string(l.kind)))
		from = max(from, 0)
		add := func(row templates.ExemptionRow) {
			if list.Total >= from && list.Total < from+exemptionsPage {
				list.Rows = append(list.Rows, row)
			}
			list.Total++
		}
		for _, x := range file {
			if x.Kind == l.kind {
				add(templates.ExemptionRow{Kind: string(x.Kind), Value: x.Value, File: true})
			}
		}
		for _, x := range live {
			if x.Kind == l.kind {
				row := templates.ExemptionRow{Kind: string(x.Kind), Value: x.Value, Note: x.Note}
				if !x.Expires.IsZero() {
					row.Expires, row.ExpiresIn = stamp(x.Expires), "in "+spanText(x.Expires.Sub(now))
				}
				add(row)
			}
		}
		list.From = min(from, list.Total)
		page := func(at int) string {
			p := url.Values{}
			for k, v := range q {
				p[k] = v
			}
			p.Set(string(l.kind), strconv.Itoa(at))
			return "/exemptions?" + p.Encode() + "#" + list.ID()
		}
		if list.From > 0 {
			list.PrevURL = page(max(list.From-exemptionsPage, 0))
		}
		if list.From+exemptionsPage < list.Total {
			list.NextURL = page(list.From + exemptionsPage)
		}
		e.Lists = append(e.Lists, list)
	}
	return e
}
