package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/ratedb/ratedb"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// MaxRuleBody is the largest PUT /v1/rules/{name} body, in bytes.
const MaxRuleBody = 64 << 10

// ruleBody is the flat PUT body: a rule without its name, which comes from
// the URL.
type ruleBody struct {
	ClientID  string           `json:"client_id"`
	Route     string           `json:"route"`
	Algorithm string           `json:"algorithm"`
	Limit     *int64           `json:"limit"`
	Window    string           `json:"window"`
	Tiers     []rules.TierSpec `json:"tiers"`
}

// ruleFields are ruleBody's JSON names (and rules.TierSpec's under "tiers"),
// for checkStrict.
var ruleFields = strictFields{
	"client_id": nil, "route": nil, "algorithm": nil, "limit": nil, "window": nil,
	"tiers": {"limit": nil, "window": nil},
}

// DecodeRule decodes and validates a PUT body for the rule called name,
// reporting every problem at once (errors wrap rules.ErrInvalidRule). The
// body must be one JSON object in valid UTF-8 whose members, and those of
// each "tiers" object, are named exactly as documented, each at most once,
// and whose strings hold no U+FFFD (which a literal U+FFFD, "\ufffd" or an
// escaped lone surrogate such as "\ud800" would give: all are refused),
// with a single value (a string, number, boolean or null) for each member
// but "tiers", which is null or an array of objects and nulls; a body that
// is not is refused with that one problem. Any other value of the wrong
// type is one problem among the others, named by its place ("route",
// "tiers[1].limit"): every such value is reported, and none is reported as
// missing. Of more than rules.MaxTiers tiers, only the first rules.MaxTiers
// are checked (as rules.Build does), so that the problems stay few.
func DecodeRule(name string, body []byte) (*rules.Rule, error) {
	if err := checkStrict(body, ruleFields); err != nil {
		return nil, &rules.ValidationError{Problems: []string{err.Error()}}
	}
	// checkStrict refused unknown, misspelt and repeated members, and a
	// "tiers" that is an object or holds anything but objects and nulls.
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return nil, &rules.ValidationError{Problems: []string{describeJSONError(err)}}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &rules.ValidationError{Problems: []string{"data after the JSON object"}}
	}
	// Each member is decoded on its own, so that a value of the wrong type
	// is one problem among the others (encoding/json reports only the
	// first, and the members after it would read as missing).
	var typeProblems []string
	mistyped := map[string]bool{}
	decode := func(place string, v json.RawMessage, dst any, want string) {
		if v != nil && json.Unmarshal(v, dst) != nil {
			typeProblems = append(typeProblems, place+" must be "+want)
			mistyped[place] = true
		}
	}
	limitWant := fmt.Sprintf("an integer from 0 to %d", int64(rules.MaxLimit))
	const windowWant = `a string holding a duration such as "60s"`
	var spec rules.Spec
	decode("client_id", raw["client_id"], &spec.ClientID, "a string")
	decode("route", raw["route"], &spec.Route, "a string")
	decode("algorithm", raw["algorithm"], &spec.Algorithm, "a string")
	decode("limit", raw["limit"], &spec.Limit, limitWant)
	decode("window", raw["window"], &spec.Window, windowWant)
	var tiers []json.RawMessage
	decode("tiers", raw["tiers"], &tiers, "an array of objects with limit and window")
	for i, v := range tiers {
		if i >= rules.MaxTiers {
			// Build reports too many tiers and checks only the first
			// MaxTiers: so are their types, which keeps the answer to a
			// body of thousands of tiers short.
			spec.Tiers = append(spec.Tiers, rules.TierSpec{})
			continue
		}
		var members map[string]json.RawMessage
		_ = json.Unmarshal(v, &members) // an object or null: checkStrict checked
		var t rules.TierSpec
		place := fmt.Sprintf("tiers[%d].", i)
		decode(place+"limit", members["limit"], &t.Limit, limitWant)
		decode(place+"window", members["window"], &t.Window, windowWant)
		spec.Tiers = append(spec.Tiers, t)
	}
	r, err := rules.Build(name, spec, false)
	if len(typeProblems) == 0 {
		return r, err
	}
	// A mistyped value reads as missing to Build: keep only its problems
	// about other fields. Given tiers that were mistyped, a rule without a
	// limit and a window is not missing them either.
	problems := typeProblems
	var ve *rules.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			place, _, _ := strings.Cut(p, " ")
			if mistyped[place] || (mistyped["tiers"] && spec.Limit == nil && spec.Window == "" && (place == "limit" || place == "window")) {
				continue
			}
			problems = append(problems, p)
		}
	}
	return nil, &rules.ValidationError{Problems: problems}
}

func specOf(r *rules.Rule) rules.Spec { return r.Spec() }

// listRules serves GET /v1/rules.
func (s *Server) listRules(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, http.MethodGet)
		return
	}
	if !s.admin(w, r) {
		return
	}
	set := s.opts.Rules.Current()
	out := []rules.Spec{}
	for _, rule := range set.Rules() {
		out = append(out, specOf(rule))
	}
	body := map[string]any{"rules": out, "default": specOf(set.Default())}
	if s.opts.EnvoyRules != nil {
		if envoy := s.opts.EnvoyRules(); envoy != nil {
			body["envoy"] = envoy
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// matchRule serves GET /v1/rules/match?client_id=..&route=..
func (s *Server) matchRule(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, http.MethodGet)
		return
	}
	if !s.admin(w, r) {
		return
	}
	// r.URL.Query drops a pair it cannot parse (one holding ';', or a '%'
	// not followed by two hex digits) and would blame a missing id.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "the query string is malformed: percent-encode ';' and '%' in client_id and route", nil)
		return
	}
	client, route := q.Get("client_id"), q.Get("route")
	// The values a check may carry (DecodeCheck): a check could not send
	// any other, so no rule applies to it.
	var problems []string
	for _, f := range []struct{ name, v string }{{"client_id", client}, {"route", route}} {
		switch {
		case f.v == "" || len(f.v) > MaxIDLen:
			problems = append(problems, fmt.Sprintf("%s must be 1 to %d bytes", f.name, MaxIDLen))
		case !utf8.ValidString(f.v) || strings.ContainsRune(f.v, utf8.RuneError):
			problems = append(problems, f.name+" must be valid UTF-8 and may not hold U+FFFD, as in a check")
		}
	}
	if len(problems) > 0 {
		writeError(w, http.StatusBadRequest, joinProblems(problems), nil)
		return
	}
	rule, reason := s.opts.Rules.Current().Match(client, route)
	writeJSON(w, http.StatusOK, map[string]any{"rule": specOf(rule), "reason": reason})
}

// rule serves GET, PUT and DELETE /v1/rules/{name}.
func (s *Server) rule(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodPut, http.MethodDelete:
	default:
		methodNotAllowed(w, "GET, PUT, DELETE")
		return
	}
	if !s.admin(w, r) {
		return
	}
	name := r.PathValue("name")
	switch r.Method {
	case http.MethodGet:
		rule, ok := s.opts.Rules.Current().Get(name)
		if !ok {
			writeError(w, http.StatusNotFound, "no such rule", nil)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"rule": specOf(rule)})
	case http.MethodPut:
		body, ok := readBody(w, r, MaxRuleBody)
		if !ok {
			return
		}
		rule, err := DecodeRule(name, body)
		if err != nil {
			var ve *rules.ValidationError
			if errors.As(err, &ve) {
				writeError(w, http.StatusBadRequest, "invalid rule: "+joinProblems(ve.Problems), map[string]any{"problems": ve.Problems})
				return
			}
			writeError(w, http.StatusBadRequest, "invalid rule", nil)
			return
		}
		created, err := s.opts.Rules.Put(rule)
		if err != nil {
			s.rulesStoreFailed(w, err)
			return
		}
		s.opts.Logger.Info("rule stored", "rule", name, "created", created)
		// The rule as stored has rule's Spec (only its generation may
		// differ). Reading it back from the current set could find nothing:
		// a concurrent DELETE, or a reload from Redis, may have removed it.
		code := http.StatusOK
		if created {
			code = http.StatusCreated
		}
		writeJSON(w, code, map[string]any{"rule": specOf(rule)})
	case http.MethodDelete:
		err := s.opts.Rules.Delete(name)
		switch {
		case errors.Is(err, rules.ErrNotFound) && name == rules.DefaultName:
			// GET /v1/rules/default answers the default rule: "no such
			// rule" would contradict it. (A stored rule of that name,
			// which only another version or a hand edit can have
			// written, is deleted above.)
			writeError(w, http.StatusBadRequest, "the default rule cannot be deleted: the --default-* flags set it", nil)
		case errors.Is(err, rules.ErrNotFound):
			writeError(w, http.StatusNotFound, "no such rule", nil)
		case err != nil:
			s.rulesStoreFailed(w, err)
		default:
			s.opts.Logger.Info("rule deleted", "rule", name)
			writeJSON(w, http.StatusOK, map[string]any{"deleted": name})
		}
	}
}

// rulesStoreFailed answers a change of the rules that could not be saved: 503
// when the store is unavailable (Redis does not answer), 507 when the rules
// would not fit their bound (rules.ErrRulesFileFull: the rules file's or,
// with --redis, the Redis value's), 500
// otherwise.
func (s *Server) rulesStoreFailed(w http.ResponseWriter, err error) {
	s.opts.Logger.Error("saving rules failed", "err", err)
	switch {
	case errors.Is(err, ratedb.ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, "the rules store is unavailable", nil)
		return
	case errors.Is(err, rules.ErrRulesFileFull):
		writeError(w, http.StatusInsufficientStorage, "the rules would not fit their bound (at most 256 MiB): delete rules first", nil)
		return
	}
	writeError(w, http.StatusInternalServerError, "saving the rules failed", nil)
}
