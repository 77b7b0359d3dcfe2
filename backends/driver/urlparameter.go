package driver

// URLParameter documents one query parameter of a backend's base path URL.
// Each backend package of this module exports the parameters its URL form
// takes as a []URLParameter named URLParameters, which its URL parser
// checks against, so that the documentation and the parser cannot drift
// apart.
type URLParameter struct {
	// Name is the query parameter's key, e.g. "part_size".
	Name string `json:"name"`
	// Value is the kind of value it takes: BOOL, SIZE (bytes, or with
	// KiB/MiB/GiB), DURATION (Go's syntax, e.g. 30s), N (an integer), URL,
	// NAME, PATH, ID or MODE.
	Value string `json:"value"`
	// Default is what applies when the parameter is absent, in words; empty
	// when there is nothing to say.
	Default string `json:"default,omitempty"`
	// Description says what the parameter does.
	Description string `json:"description"`
	// Example is a value the parser accepts, e.g. "8MiB".
	Example string `json:"example"`
}

// URLParameterNames returns the names of params, in their order.
func URLParameterNames(params []URLParameter) []string {
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
	}
	return names
}
