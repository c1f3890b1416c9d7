// Package httpapi is the service's HTTP JSON adapter: POST /v1/check, the
// admin rules API under /v1/rules, /metrics, /healthz and /readyz. It only
// translates: the rule comes from the rules package, the decision from the
// core.
package httpapi
