"""`Agency`: setup only (validates the chart, wires agents to shared threads and settings) and its drawing."""
