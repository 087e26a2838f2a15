"""The plug-in contract: studies, the measure protocol and registry, their checks, figure recipes and plug-in loading."""
