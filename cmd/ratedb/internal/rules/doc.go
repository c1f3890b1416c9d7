// Package rules holds the service's rules: a name, a client_id pattern and a
// route pattern, and either one window or layered tiers. It validates rules
// (reporting every problem at once), matches a request to the rule that
// applies (see Set.Match for the precedence table), and stores the rules so
// that they survive restarts.
package rules
