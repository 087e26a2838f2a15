"""The built-in studies: each subpackage registers one (the engine finds them; it names none)."""
