package redisstate

import "errors"

var (
	// ErrClusterNode is returned by CheckNotClusterNode for a single address
	// that is a node of a Redis Cluster.
	ErrClusterNode = errors.New("--redis names one node of a Redis Cluster: give the nodes as a comma list (one node and a trailing comma is enough: redis://host:port,) so that keys on the other nodes are reached")

	// ErrRulesTooLarge is returned (wrapped) by RulesStorage's Load and
	// Update when the rules' value in Redis (RulesKey) holds more than
	// rules.MaxFileSize bytes, the bound of the rules file: the value is
	// not read. The service does not start with it, and a running one
	// keeps the rules it serves. Match it with errors.Is.
	ErrRulesTooLarge = errors.New("redisstate: the rules in Redis are larger than their bound of 256 MiB (268435456 bytes)")
)
