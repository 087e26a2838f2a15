"""What tasks do: iterate a network (depth dynamics), derive measures from stored results."""
