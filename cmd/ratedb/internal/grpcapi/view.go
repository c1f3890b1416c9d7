package grpcapi

// RuleView is the JSON form of one envoy-config rule in GET /v1/rules.
// Envoy rules are read-only there: they change only with the config files.
type RuleView struct {
	Domain          string      `json:"domain"`
	Descriptors     []EntryView `json:"descriptors"`
	Name            string      `json:"name,omitempty"`
	RequestsPerUnit uint32      `json:"requests_per_unit"`
	Unit            string      `json:"unit,omitempty"`
	Unlimited       bool        `json:"unlimited,omitempty"`
	ShadowMode      bool        `json:"shadow_mode,omitempty"`
	QuotaMode       bool        `json:"quota_mode,omitempty"`
	Replaces        []string    `json:"replaces,omitempty"`
	ReadOnly        bool        `json:"read_only"`
}

// EntryView is one key (and optional value) of a RuleView's descriptor.
type EntryView struct {
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
}

// RuleViews lists the rules in use, in envoyconf.Config.Rules order.
func (s *Server) RuleViews() []RuleView {
	rs := s.Config().Rules()
	out := make([]RuleView, 0, len(rs))
	for _, r := range rs {
		v := RuleView{
			Domain: r.Domain, Name: r.Limit.Name, RequestsPerUnit: r.Limit.RequestsPerUnit,
			Unlimited: r.Limit.Unlimited, ShadowMode: r.Limit.ShadowMode, QuotaMode: r.Limit.QuotaMode,
			Replaces: r.Limit.Replaces, ReadOnly: true,
		}
		if !r.Limit.Unlimited {
			v.Unit = r.Limit.Unit.String()
		}
		for _, e := range r.Descriptor {
			v.Descriptors = append(v.Descriptors, EntryView(e))
		}
		out = append(out, v)
	}
	return out
}
