// Package bytesize reads and writes byte counts with binary multiples, as
// goddp's flags and environment variables take them: "4096", "4K", "64M",
// "1G", also spelled "64MiB" or "64MB" (all binary: 1K is 1024 bytes).
package bytesize
