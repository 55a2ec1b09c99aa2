from abo.cli.main import main

main()
