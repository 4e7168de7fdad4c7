// Package procstat tells whether a process recorded by its pid and start
// time still runs. goddp's files that outlive a crash (shared-memory
// segments, checkpoint temporaries, the launcher's temp dirs) name their
// creator this way, so that whoever comes next removes only what a dead
// process left: the start time tells a reused pid from the original.
package procstat
