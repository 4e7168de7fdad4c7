package launch

import "net"

// isLocalAddr reports whether host names an address of this machine.
func isLocalAddr(host string) bool {
	ips, err := net.LookupIP(host)
	if err != nil {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, ip := range ips {
		if ip.IsLoopback() {
			return true
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return true
			}
		}
	}
	return false
}

// onlyLoopback reports whether host resolves to loopback addresses only
// (a hostname mapped to 127.0.1.1 in /etc/hosts, say).
func onlyLoopback(host string) bool {
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// outboundAddr is the local address the kernel would use to reach
// endpoint (a UDP "connect" sends nothing).
func outboundAddr(endpoint string) string {
	c, err := net.Dial("udp", endpoint)
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	h, _, _ := net.SplitHostPort(c.LocalAddr().String())
	return h
}
